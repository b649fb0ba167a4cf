import Metrics

/// What the use cases count, through swift-metrics: whichever backend the process set up
/// (the server's Prometheus registry) receives them.
public enum CommandMetrics {
    /// A command by its case name (`postRental`, never its fields).
    static func command(_ command: Any, outcome: String) {
        self.command(named: Mirror(reflecting: command).children.first?.label ?? String(describing: command), outcome: outcome)
    }

    static func command(named name: String, outcome: String) {
        Counter(label: "lender_commands_total", dimensions: [("command", name), ("outcome", outcome)]).increment()
    }

    static var retries: Counter { Counter(label: "lender_expected_version_retries_total") }
}
