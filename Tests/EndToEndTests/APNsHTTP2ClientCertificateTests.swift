import Foundation
import Ingress
import RelayBasics
import RelayJSON
import RelayServer
import Testing
import TestSupport

/// TLS client certificates standing for API keys on the HTTP/2 APNs ingress
/// (`apns_ingress.client_ca_file`, an `api_keys` entry's
/// `client_certificate`), for libraries that authenticate to APNs with a
/// certificate. The certificates are made with the openssl command and
/// presented by curl; fingerprints are openssl's, not the relay's.
@Suite("HTTP/2 APNs ingress: TLS client certificates", .serialized)
struct APNsHTTP2ClientCertificateTests {
    /// A CA, three certificates it signed and one it did not, in a directory of their own.
    struct Certificates {
        let directory: String
        var caFile: String { directory + "/ca.pem" }

        init() throws {
            directory = NSTemporaryDirectory() + "apns-relay-client-certs-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                              "-subj", "/O=Relay Test CA/CN=client CA", "-keyout", directory + "/ca.key", "-out", caFile])
            for (name, subject) in [("by-fingerprint", "/O=Example/CN=backend"), ("by-subject", "/O=Example/CN=other-backend"), ("unnamed", "/O=Example/CN=nobody")] {
                try Self.openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject,
                                  "-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr"])
                try Self.openssl(["x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", caFile, "-CAkey", directory + "/ca.key",
                                  "-CAcreateserial", "-days", "2", "-out", "\(directory)/\(name).pem"])
            }
            // Self-signed: the client CA never signed it.
            try Self.openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                              "-subj", "/O=Example/CN=backend", "-keyout", directory + "/rogue.key", "-out", directory + "/rogue.pem"])
        }

        /// openssl's SHA-256 fingerprint of `name`'s certificate, `AB:CD:…`.
        func fingerprint(_ name: String) throws -> String {
            let output = try Self.openssl(["x509", "-in", "\(directory)/\(name).pem", "-noout", "-fingerprint", "-sha256"])
            guard let value = output.split(separator: "=", maxSplits: 1).last else { throw TestRelayError("openssl fingerprint: \(output)") }
            return value.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func remove() { try? FileManager.default.removeItem(atPath: directory) }

        @discardableResult
        static func openssl(_ arguments: [String]) throws -> String {
            let (status, output) = try ProcessRunner.run(["openssl"] + arguments)
            guard status == 0 else { throw TestRelayError("openssl \(arguments.joined(separator: " ")): \(output)") }
            return output
        }
    }

    /// curl over TLS (ALPN h2) with `certificate`'s certificate and key (none when nil).
    /// Its exit status, and the answer when it got one.
    static func curl(
        port: Int, serverCA: String, certificates: Certificates, certificate: String?, path: String, headers: [String], body: String
    ) async throws -> (Int32, TestRelay.Answer?) {
        var arguments = ["curl", "-s", "-S", "-i", "-X", "POST", "--max-time", "60", "--http2", "--cacert", serverCA]
        if let certificate {
            arguments += ["--cert", "\(certificates.directory)/\(certificate).pem", "--key", "\(certificates.directory)/\(certificate).key"]
        }
        for header in headers { arguments += ["-H", header] }
        arguments += ["--data-binary", "@-", "https://127.0.0.1:\(port)\(path)"]
        let (status, output) = try await ProcessRunner.runOffPool(arguments, input: Data(body.utf8))
        return (status, status == 0 ? try TestRelay.parse(output) : nil)
    }

    @Test("a certificate the client CA signed stands for the key naming its fingerprint or subject; an unnamed one is 403 BadCertificate, one the CA never signed fails the handshake; a token, when sent, decides")
    func certificates() async throws {
        let key = try APNsHTTP2IngressTests.BackendKey()
        defer { key.file.remove() }
        let certificates = try Certificates()
        defer { certificates.remove() }
        let fingerprint = try certificates.fingerprint("by-fingerprint")
        let url = ProcessInfo.processInfo.environment["APNS_RELAY_TEST_DATABASE_URL"]
        try await APNsHTTP2IngressTests.withIngress(key: key, databaseURL: url, configure: { configuration in
            configuration.apnsIngress.clientCAFile = certificates.caFile
            let backend = configuration.apiKeys.firstIndex { $0.name == "backend" }!
            configuration.apiKeys[backend].clientCertificate = .sha256(fingerprint.filter { $0 != ":" }.lowercased())
            let other = configuration.apiKeys.firstIndex { $0.name == "other" }!
            configuration.apiKeys[other].clientCertificate = .subject("/O=Example/CN=other-backend")
        }) { relay, port, serverCA in
            let payload = #"{"aps":{"alert":"by certificate"}}"#
            func send(_ certificate: String?, topic: String, extra: [String] = []) async throws -> (Int32, TestRelay.Answer?, String) {
                let apnsID = UUID().uuidString.lowercased()
                let (status, answer) = try await Self.curl(
                    port: port, serverCA: serverCA, certificates: certificates, certificate: certificate, path: "/3/device/\(TestRelay.token(6))",
                    headers: ["apns-topic: \(topic)", "apns-id: \(apnsID)"] + extra, body: payload)
                return (status, answer, apnsID)
            }

            // By fingerprint: the backend key (app-a). By subject: the other key (app-b).
            for (certificate, topic, caller) in [("by-fingerprint", "com.example.a", "backend"), ("by-subject", "com.example.b", "other")] {
                let (status, answer, apnsID) = try await send(certificate, topic: topic)
                #expect(status == 0 && answer?.status == 200, "\(certificate): \(String(describing: answer))")
                let request = try #require(APNsHTTP2IngressTests.received(relay, apnsID: apnsID), "\(certificate): APNs never saw it")
                #expect(request.body == Array(payload.utf8))
                #expect(request.headers.value(of: "apns-topic") == topic)
                #expect(APNsHTTP2IngressTests.keyID(ofBearer: request.headers.value(of: "authorization") ?? "") == "E2EKEY1234")
                if let url {
                    let row = try #require(try await APNsHTTP2IngressTests.auditRow(url, apnsID: apnsID), "no audit row for \(apnsID)")
                    #expect(row[0] == caller && row[1] == "200", "\(row)")
                }
            }
            let before = relay.mock.engine.log.total
            // The fingerprint's key may use app-a only: its certificate does not reach app-b.
            let (_, crossed, _) = try await send("by-fingerprint", topic: "com.example.b")
            #expect(crossed?.status == 403 && crossed?.json?["reason"]?.stringValue == "TopicDisallowed", "\(String(describing: crossed))")
            // Signed by the CA, named by no key.
            let (_, unnamed, _) = try await send("unnamed", topic: "com.example.a")
            #expect(unnamed?.status == 403 && unnamed?.json?["reason"]?.stringValue == "BadCertificate", "\(String(describing: unnamed))")
            // Not signed by the CA: no TLS session at all.
            let (rogueStatus, rogue, _) = try await send("rogue", topic: "com.example.a")
            #expect(rogueStatus != 0 && rogue == nil, "a certificate the CA never signed got an answer: \(String(describing: rogue))")
            // No certificate, no token: as before.
            let (_, missing, _) = try await send(nil, topic: "com.example.a")
            #expect(missing?.status == 403 && missing?.json?["reason"]?.stringValue == "MissingProviderToken", "\(String(describing: missing))")
            // A token decides over the certificate: a bad one is refused whatever the certificate says.
            let (_, badToken, _) = try await send("by-fingerprint", topic: "com.example.a", extra: ["authorization: bearer \(try key.token(issuer: "OTHERTEAM1"))"])
            #expect(badToken?.status == 403 && badToken?.json?["reason"]?.stringValue == "InvalidProviderToken", "\(String(describing: badToken))")
            #expect(relay.mock.engine.log.total == before, "a refused request reached APNs")
        }
    }
}
