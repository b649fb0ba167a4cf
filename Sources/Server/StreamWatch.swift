import Marketplace
import Projections
import UseCases

/// Whether the reader of a live stream may still read it: their session alive (a logout on
/// any server ends it: the session announcements reach every server's cache) and, for the
/// log, their auditor's role not revoked. Asked once a heartbeat at most, whether the stream
/// is busy or quiet; a stream whose answer is no, or that cannot ask, ends (the client
/// reconnects, and is answered as any request is).
struct StreamWatch: Sendable {
    let accounts: Accounts
    let token: String
    let user: UserID
    /// Checked too for the auditors' stream.
    var auditors: Auditors?
    let every: Duration
    private let clock = ContinuousClock()
    private var lastChecked: ContinuousClock.Instant

    init(accounts: Accounts, token: String, user: UserID, auditors: Auditors? = nil, every: Duration) {
        self.accounts = accounts
        self.token = token
        self.user = user
        self.auditors = auditors
        self.every = every
        self.lastChecked = clock.now
    }

    /// False once the reader may no longer read; true until then, asking at most once `every`.
    mutating func mayGoOn() async -> Bool {
        guard clock.now - lastChecked >= every else { return true }
        lastChecked = clock.now
        guard let signedIn = try? await accounts.authenticate(token: token), signedIn == user else { return false }
        guard let auditors else { return true }
        return (try? await auditors.contains(user)) ?? false
    }
}
