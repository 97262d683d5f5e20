import Foundation
import Ingress
import RelayServer
import Testing

/// `apns_ingress:` and an API key's `provider_key:`: read, checked, shown by check-config.
@Suite("HTTP/2 APNs ingress configuration")
struct APNsIngressConfigurationTests {
    static func parse(_ yaml: String) throws -> ServerConfiguration {
        try ServerConfiguration.parse(yaml: ConfigurationTests.apps + yaml, file: "/tmp/relay.yaml", environment: [:])
    }

    @Test("off by default, and while listen is empty")
    func offByDefault() throws {
        #expect(try Self.parse("").apnsIngress.listen == nil)
        let empty = try Self.parse("apns_ingress:\n  listen: \"\"\n")
        #expect(empty.apnsIngress.listen == nil)
        #expect(empty.maskedDescription.contains("apns_ingress:\n  listen: \"\"  # off"))
    }

    @Test("TLS needs its certificate and key; cleartext does not; limits are read, range-checked and shown")
    func settings() throws {
        do {
            _ = try Self.parse("apns_ingress:\n  listen: 127.0.0.1:8443\n")
            Issue.record("TLS without a certificate was accepted")
        } catch {
            #expect("\(error)".contains("apns_ingress.certificate_file"), "\(error)")
        }
        let tls = try Self.parse("apns_ingress:\n  listen: 127.0.0.1:8443\n  certificate_file: cert.pem\n  private_key_file: key.pem\n  environment: production\n")
        #expect(tls.apnsIngress.certificateFile == "/tmp/cert.pem")
        #expect(tls.apnsIngress.environment?.rawValue == "production")
        #expect(tls.maskedDescription.contains("certificate_file: /tmp/cert.pem"))
        let clear = try Self.parse("apns_ingress:\n  listen: 127.0.0.1:8443\n  tls: false\n  max_concurrent_streams: 50\n  max_connections_per_client: 4\n  request_timeout_seconds: 2.5\n")
        #expect(clear.apnsIngress.tls == false)
        #expect(clear.apnsIngress.maximumConcurrentStreams == 50)
        #expect(clear.apnsIngress.maximumConnectionsPerClient == 4)
        #expect(clear.apnsIngress.requestTimeoutSeconds == 2.5)
        #expect(clear.maskedDescription.contains("tls: false  # cleartext HTTP/2 with prior knowledge"))
        #expect(clear.maskedDescription.contains("max_concurrent_streams: 50"))
        for (field, bad) in [("max_concurrent_streams", "0"), ("max_body_bytes", "100"), ("environment", "staging"), ("tls", "maybe"), ("unknown_field", "1")] {
            do {
                _ = try Self.parse("apns_ingress:\n  listen: 127.0.0.1:8443\n  tls: false\n  \(field): \(bad)\n")
                Issue.record("\(field): \(bad) was accepted")
            } catch {
                #expect("\(error)".contains(field), "\(field): \(bad): \(error)")
            }
        }
    }

    @Test("provider_key: key id, team id and a PEM public key file, shown without the key")
    func providerKey() throws {
        let directory = NSTemporaryDirectory() + "provider-key-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pem = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"
        FileManager.default.createFile(atPath: directory + "/backend.pub.pem", contents: Data(pem.utf8))
        func parse(_ entry: String) throws -> ServerConfiguration {
            let yaml = """
                apps:
                  - {name: a, bundle_id: com.example.a, team_id: ABCDE12345, key_id: KEY1234567, key_path: /nonexistent.p8, environments: [development]}
                api_keys:
                  - {name: b, sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc37, apps: [a], provider_key: \(entry)}

                """
            return try ServerConfiguration.parse(yaml: yaml, file: directory + "/relay.yaml", environment: [:])
        }
        let configuration = try parse("{key_id: BKEND12345, team_id: BTEAM12345, public_key_file: backend.pub.pem}")
        let key = try #require(configuration.apiKeys.first?.providerKey)
        #expect(key.keyID == "BKEND12345" && key.teamID == "BTEAM12345" && key.publicKeyPEM == pem)
        #expect(configuration.maskedDescription.contains("      public_key_file: \(directory)/backend.pub.pem"))
        #expect(!configuration.maskedDescription.contains("MFkw"))
        for (field, entry) in [
            ("key_id", "{key_id: short, team_id: BTEAM12345, public_key_file: backend.pub.pem}"),
            ("team_id", "{key_id: BKEND12345, public_key_file: backend.pub.pem}"),
            ("public_key_file", "{key_id: BKEND12345, team_id: BTEAM12345, public_key_file: missing.pem}"),
        ] {
            do {
                _ = try parse(entry)
                Issue.record("\(entry) was accepted")
            } catch {
                #expect("\(error)".contains("api_keys[0].provider_key.\(field)"), "\(entry): \(error)")
            }
        }
    }
    @Test("client_ca_file (a PEM certificate, TLS only) and an API key's client_certificate (sha256 with or without colons, or subject; one of the two), shown by check-config")
    func clientCertificates() throws {
        let directory = NSTemporaryDirectory() + "client-ca-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        FileManager.default.createFile(atPath: directory + "/ca.pem", contents: Data("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".utf8))
        FileManager.default.createFile(atPath: directory + "/not-a-cert.pem", contents: Data("hello\n".utf8))
        func parse(ingress: String, certificate: String) throws -> ServerConfiguration {
            let yaml = """
                apps:
                  - {name: a, bundle_id: com.example.a, team_id: ABCDE12345, key_id: KEY1234567, key_path: /nonexistent.p8, environments: [development]}
                api_keys:
                  - {name: b, sha256: f8f4bf7056494c85a232414dbf744875d3457a9a1e995c37510506acbccffc37, apps: [a], client_certificate: \(certificate)}
                apns_ingress:
                  listen: 127.0.0.1:8443
                \(ingress)

                """
            return try ServerConfiguration.parse(yaml: yaml, file: directory + "/relay.yaml", environment: [:])
        }
        let tls = "  certificate_file: cert.pem\n  private_key_file: key.pem\n  client_ca_file: ca.pem"
        let colons = (0..<32).map { _ in "AB" }.joined(separator: ":")
        let byFingerprint = try parse(ingress: tls, certificate: "{sha256: \"\(colons)\"}")
        #expect(byFingerprint.apnsIngress.clientCAFile == directory + "/ca.pem")
        #expect(byFingerprint.apiKeys.first?.clientCertificate == .sha256(String(repeating: "ab", count: 32)))
        #expect(byFingerprint.maskedDescription.contains("  client_ca_file: \(directory)/ca.pem"))
        #expect(byFingerprint.maskedDescription.contains("    client_certificate: {sha256: \(String(repeating: "ab", count: 32))}"))
        let bySubject = try parse(ingress: tls, certificate: "{subject: \"/O=Example/CN=backend\"}")
        #expect(bySubject.apiKeys.first?.clientCertificate == .subject("/O=Example/CN=backend"))
        for (field, ingress, certificate) in [
            ("apns_ingress.client_ca_file", "  certificate_file: cert.pem\n  private_key_file: key.pem\n  client_ca_file: not-a-cert.pem", "{subject: /CN=x}"),
            ("apns_ingress.client_ca_file", "  tls: false\n  client_ca_file: ca.pem", "{subject: /CN=x}"),
            ("api_keys[0].client_certificate.sha256", tls, "{sha256: abcd}"),
            ("api_keys[0].client_certificate.sha256", tls, "{sha256: \(String(repeating: "ab", count: 32)), subject: /CN=x}"),
            ("api_keys[0].client_certificate.subject", tls, "{subject: CN=x}"),
        ] {
            do {
                _ = try parse(ingress: ingress, certificate: certificate)
                Issue.record("\(ingress) \(certificate) was accepted")
            } catch {
                #expect("\(error)".contains(field), "\(certificate): \(error)")
            }
        }
    }
}
