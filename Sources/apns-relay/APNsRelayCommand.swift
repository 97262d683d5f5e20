import ArgumentParser

/// `apns-relay`: the relay's command line.
@main
struct APNsRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "An observable relay between your backends and Apple Push Notification service.",
        discussion: """
            Commands available today: mock-apns (the APNs stand-in), describe (the exact request a send \
            would issue), migrate and audit (the Postgres audit log), bench (measured against a reference). \
            The relay server (serve), send, check-config and demo arrive with the ingress.
            """,
        subcommands: [MockAPNsCommand.self, DescribeCommand.self, MigrateCommand.self, AuditCommand.self, BenchCommand.self]
    )
}
