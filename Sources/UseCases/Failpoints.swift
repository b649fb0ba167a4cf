import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Named points at which the server dies at once, as `kill -9` would, when the point is armed
/// in `LENDER_FAILPOINTS` (`charge.after,append.after-commit`): how the tests crash it at the
/// worst moments of moving money. Unarmed, a point costs one set lookup.
public enum Failpoints {
    public enum Point: String, CaseIterable, Sendable {
        /// The processor charged the card; nothing is appended yet.
        case chargeAfter = "charge.after"
        /// The processor authorised a rental bid's charge on a card; nothing is appended yet.
        case authorizeAfter = "authorize.after"
        /// The processor captured an approved bid's authorisation; nothing is appended yet.
        case captureAfter = "capture.after"
        /// The command's events are committed; no answer is sent yet.
        case appendAfterCommit = "append.after-commit"
        /// The payout processor made a payout's transfer; its outcome is not recorded yet.
        case payoutAfter = "payout.after"
        /// An outbox row was handed to the SMTP server (or the push service); it is not marked sent.
        case outboxAfterSend = "outbox.after-send"
    }

    static let armed: Set<String> = parse(ProcessInfo.processInfo.environment["LENDER_FAILPOINTS"] ?? "")

    static func parse(_ text: String) -> Set<String> {
        Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
    }

    /// The armed names that name no point, so that `lender serve` refuses a misspelt one.
    public static var unknown: [String] {
        armed.subtracting(Point.allCases.map(\.rawValue)).sorted()
    }

    static func hit(_ point: Point) {
        guard armed.contains(point.rawValue) else { return }
        kill(getpid(), SIGKILL)
    }
}
