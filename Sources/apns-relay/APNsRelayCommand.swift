import ArgumentParser

/// `apns-relay`: the relay's command line.
@main
struct APNsRelayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns-relay",
        abstract: "An observable relay between your backends and Apple Push Notification service.",
        discussion: """
            serve runs the relay from a YAML configuration (deploy/apns-relay.example.yaml); check-config \
            validates one; api-key new makes a backend's API key and its configuration entry; send pushes one notification straight to APNs (or prints it with --describe); \
            describe prints the exact request a send would make; migrate and audit work on the Postgres \
            audit log; mock-apns runs the APNs stand-in; demo runs everything against it; bench measures \
            against a reference.
            """,
        subcommands: [
            ServeCommand.self, CheckConfigCommand.self, APIKeyCommand.self, SendCommand.self, DescribeCommand.self, MigrateCommand.self, AuditCommand.self,
            MockAPNsCommand.self, DemoCommand.self, BenchCommand.self, SettingsTableCommand.self,
        ]
    )
}
