import ArgumentParser

/// `apns-relay`: the relay's command line.
@main
struct APNsRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "An observable relay between your backends and Apple Push Notification service.",
        discussion: """
            Today the command line runs the built-in mock APNs and the transport benchmark; \
            the relay server, send, describe, migrate and audit commands arrive with the ingress.
            """,
        subcommands: [MockAPNsCommand.self, BenchCommand.self, DescribeCommand.self]
    )
}
