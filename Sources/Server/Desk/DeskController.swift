import Aggregates
import Crypto
import EventStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Marketplace
import NIOCore
import Postgres
import Projections
import Synchronization
import UseCases

/// The operator's desk at `/desk` (SPEC §12.6): the reads and acts of `/v1/admin` as pages.
/// Every act goes through the same use case as its JSON route; each page is a GET, each act
/// a form POST with the session's CSRF token, answered by a redirect to the page it changed.
struct DeskController: Sendable {
    let pages: DeskPages
    let sessions: DeskSessions
    let reads: AdminReads
    let reports: Reports
    let reportsView: ReportsView
    let moderation: Moderation
    let items: ItemsView
    let bookings: BookingsView
    let store: EventStore
    let readiness: Readiness
    /// The key checkpoints are verified with (`AUDIT_PUBLIC_KEY`, or the signing key's);
    /// without one, only that a checkpoint is signed by the key it names.
    let trustedKey: Curve25519.Signing.PublicKey?
    let audits: LastMoneyAudit
    let verdicts = CheckpointVerdicts()
    let today: @Sendable () -> Day
    let logger: Logger

    func addRoutes(to router: Router<AppRequestContext>) {
        router.get("/desk") { _, _ in DeskPages.redirect("/desk/reports") }
        router.get("/desk/desk.css") { _, _ in pages.css() }
        router.get("/desk/login", use: loginPage)
        router.post("/desk/login", use: login)
        router.post("/desk/logout", use: logout)
        router.get("/desk/reports", use: page(reportsPage))
        router.post("/desk/reports/:reportID/resolve", use: act { act in
            let id = ReportID(try act.id("reportID"))
            guard let action = act.form["action"].flatMap(ReportAction.init(rawValue:)) else {
                throw DomainError.invalid([FieldError(field: "action", code: "invalid_action", message: "a report action")])
            }
            _ = try await reports.resolve(id, action: action, reason: try Self.reason(act.form), by: act.who.user)
            return DeskPages.redirect("/desk/reports?done=resolved")
        })
        router.get("/desk/users", use: page(usersPage))
        router.get("/desk/users/:userID", use: page(userPage))
        router.post("/desk/users/:userID/suspend", use: act { act in
            let user = UserID(try act.id("userID"))
            var fields = FieldCheck()
            let until = fields.timestamp(act.form["until"].flatMap { $0.isEmpty ? nil : $0 }, "until")
            try fields.throwIfAny()
            _ = try await moderation.suspend(user, reason: try Self.reason(act.form), until: until, by: act.who.user, now: Date())
            return DeskPages.redirect("/desk/users/\(user)?done=suspended")
        })
        router.post("/desk/users/:userID/reinstate", use: act { act in
            let user = UserID(try act.id("userID"))
            _ = try await moderation.reinstate(user, reason: try Self.reason(act.form), by: act.who.user, now: Date())
            return DeskPages.redirect("/desk/users/\(user)?done=reinstated")
        })
        router.post("/desk/users/:userID/verify-identity", use: act { act in
            let user = UserID(try act.id("userID"))
            _ = try await moderation.verifyIdentity(user, reason: try Self.reason(act.form), by: act.who.user)
            return DeskPages.redirect("/desk/users/\(user)?done=verified")
        })
        router.post("/desk/items/:itemID/takedown", use: act { act in
            let item = ItemID(try act.id("itemID"))
            _ = try await moderation.takeDown(item, reason: try Self.reason(act.form), by: act.who.user, today: today())
            return DeskPages.redirect(Self.back(act.form, else: "/desk/items/\(item)") + "?done=taken_down")
        })
        router.get("/desk/items/:itemID", use: page(itemPage))
        // A report's subject acted on from the reports page: a loan taken down, a review or a
        // message hidden, each with its reason, as the API's routes do.
        router.post("/desk/loans/:loanID/takedown", use: act { act in
            _ = try await moderation.takeDown(LoanID(try act.id("loanID")), reason: try Self.reason(act.form), by: act.who.user)
            return DeskPages.redirect("/desk/reports?done=taken_down")
        })
        router.post("/desk/reviews/:reviewID/hide", use: act { act in
            _ = try await moderation.hideReview(try act.id("reviewID"), reason: try Self.reason(act.form), by: act.who.user)
            return DeskPages.redirect("/desk/reports?done=hidden")
        })
        router.post("/desk/messages/:messageID/hide", use: act { act in
            _ = try await moderation.hideMessage(MessageID(try act.id("messageID")), reason: try Self.reason(act.form), by: act.who.user)
            return DeskPages.redirect("/desk/reports?done=hidden")
        })
        router.get("/desk/bookings", use: page(bookingsPage))
        router.get("/desk/bookings/:bookingID", use: page(bookingPage))
        router.post("/desk/bookings/:bookingID/resolve", use: act { act in
            let booking = BookingID(try act.id("bookingID"))
            var problems = [FieldError]()
            func cents(_ name: String) -> Int {
                guard let value = act.form[name].flatMap({ Int($0.trimmingWhiteSpace()) }) else {
                    problems.append(FieldError(field: name, code: "invalid_cents", message: "a whole number of cents"))
                    return 0
                }
                return value
            }
            let (renter, owner) = (cents("renterCents"), cents("ownerCents"))
            if !problems.isEmpty { throw DomainError.invalid(problems) }
            _ = try await moderation.resolve(
                booking, renterCents: renter, ownerCents: owner, reason: try Self.reason(act.form), by: act.who.user, today: today())
            return DeskPages.redirect("/desk/bookings/\(booking)?done=resolved")
        })
        router.post("/desk/bookings/:bookingID/cancel", use: act { act in
            let booking = BookingID(try act.id("bookingID"))
            _ = try await moderation.cancel(booking, reason: try Self.reason(act.form), by: act.who.user, today: today())
            return DeskPages.redirect("/desk/bookings/\(booking)?done=cancelled")
        })
        router.get("/desk/health", use: page(healthPage))
        router.post("/desk/health/audit", use: act { _ in
            // One at a time: a second click while it runs waits for nothing and runs nothing.
            guard audits.begin() else { return DeskPages.redirect("/desk/health?done=audit_running") }
            defer { audits.end() }
            audits.keep(try await MoneyAudit().run(pool: store.pool))
            return DeskPages.redirect("/desk/health?done=audited")
        })
    }

    // MARK: Sign-in

    /// Any live session may end itself, an operator's suspended or demoted one included: the
    /// cookie and its form's token are all it takes.
    @Sendable func logout(_ request: Request, context: AppRequestContext) async throws -> Response {
        var request = request
        do {
            guard let token = request.cookies[DeskSessions.cookie]?.value, !token.isEmpty else { throw DeskRefusal.signedOut }
            let form = try DeskFormat.form(try await request.collectBody(upTo: 16 * 1024))
            try sessions.checkForm(request, form, expected: sessions.csrf(for: "session:" + token))
            _ = try await sessions.accounts.logout(token: token)
            return DeskPages.redirect("/desk/login", cookies: [DeskSessions.setCookie(DeskSessions.cookie, "", maxAge: 0, request)])
        } catch {
            return errorPage(error, who: nil)
        }
    }

    @Sendable func loginPage(_ request: Request, context: AppRequestContext) async throws -> Response {
        if (try? await sessions.signedIn(request)) != nil { return DeskPages.redirect("/desk/reports") }
        return loginForm(request, problem: nil, status: .ok)
    }

    func loginForm(_ request: Request, problem: String?, status: HTTPResponse.Status) -> Response {
        let nonce = DeskSessions.randomHex()
        return pages.page(
            "login", ["title": "Sign in", "csrf": sessions.csrf(for: "login:" + nonce), "problem": problem ?? ""], status: status,
            cookies: [DeskSessions.setCookie(DeskSessions.loginCookie, nonce, maxAge: 3600, request)])
    }

    /// The login limits are the API's (`Accounts.login`); a good password that is not an
    /// operator's ends the session it made at once.
    @Sendable func login(_ request: Request, context: AppRequestContext) async throws -> Response {
        do {
            var request = request
            let form = try DeskFormat.form(try await request.collectBody(upTo: 16 * 1024))
            let nonce = request.cookies[DeskSessions.loginCookie]?.value ?? ""
            try sessions.checkForm(request, form, expected: nonce.isEmpty ? "-" : sessions.csrf(for: "login:" + nonce))
            let session: Session
            do {
                session = try await sessions.accounts.login(
                    handle: form["handle"] ?? "", password: form["password"] ?? "", address: context.clientAddress ?? "unknown")
            } catch let error as DomainError {
                return loginForm(request, problem: error.message, status: Problem(error).status)
            }
            guard try await sessions.operators.contains(session.userId) else {
                _ = try await sessions.accounts.logout(token: session.token)
                throw DeskRefusal.notOperator
            }
            let maxAge = max(0, Int(session.expiresAt.timeIntervalSinceNow))
            return DeskPages.redirect(
                "/desk/reports",
                cookies: [
                    DeskSessions.setCookie(DeskSessions.cookie, session.token, maxAge: maxAge, request),
                    DeskSessions.setCookie(DeskSessions.loginCookie, "", maxAge: 0, request),
                ])
        } catch {
            return errorPage(error, who: nil)
        }
    }

    // MARK: Guards

    typealias Handler = @Sendable (Request, AppRequestContext) async throws -> Response

    /// A page for a signed-in operator: the sign-in form for anyone signed out, 403 for
    /// anyone else.
    func page(_ render: @escaping @Sendable (DeskVisit) async throws -> Response) -> Handler {
        { request, context in
            let who: DeskOperator?
            do {
                who = try await sessions.signedIn(request)
            } catch let refusal as DeskRefusal where refusal.code == DeskRefusal.notOperator.code {
                // No longer an operator: the desk's session ends here, with its cookie.
                if let token = request.cookies[DeskSessions.cookie]?.value, !token.isEmpty {
                    _ = try? await sessions.accounts.logout(token: token)
                    return DeskPages.redirect("/desk/login", cookies: [DeskSessions.setCookie(DeskSessions.cookie, "", maxAge: 0, request)])
                }
                return errorPage(refusal, who: nil)
            } catch {
                return errorPage(error, who: nil)
            }
            guard let who else { return DeskPages.redirect("/desk/login") }
            do {
                return try await render(DeskVisit(request: request, parameters: context.parameters, who: who))
            } catch {
                return errorPage(error, who: who)
            }
        }
    }

    /// An act: a signed-in operator, not suspended, with the session's CSRF token from a page
    /// of this server. Refused, it changes nothing.
    func act(_ perform: @escaping @Sendable (DeskAct) async throws -> Response) -> Handler {
        { request, context in
            var who: DeskOperator?
            do {
                who = try await sessions.signedIn(request)
                guard let who else { throw DeskRefusal.signedOut }
                var request = request
                let form = try DeskFormat.form(try await request.collectBody(upTo: 64 * 1024))
                try sessions.checkForm(request, form, expected: who.csrf)
                guard !who.suspended else {
                    throw DomainError(.forbidden, "account_suspended", "This account is suspended: it may read, not act.")
                }
                return try await perform(DeskAct(request: request, parameters: context.parameters, form: form, who: who))
            } catch {
                return errorPage(error, who: who)
            }
        }
    }

    func errorPage(_ error: any Error, who: DeskOperator?) -> Response {
        let (status, code, detail): (HTTPResponse.Status, String, String) =
            switch error {
            case let refusal as DeskRefusal: (refusal.status, refusal.code, refusal.detail)
            case let domain as DomainError:
                (Problem(domain).status, domain.code, ([domain.message] + domain.fields.map { "\($0.field) (\($0.code)): \($0.message)." }).joined(separator: " "))
            case let problem as Problem: (problem.status, problem.code, problem.detail)
            default: (.internalServerError, "internal_error", "The desk failed to do this.")
            }
        if status.code >= 500 { logger.error("a desk page failed", metadata: ["error": "\(error)"]) }
        return pages.page(
            "error",
            frame(who, title: "Not done", ["code": code, "detail": detail, "back": who == nil ? "/desk/login" : "/desk/reports"]),
            status: status)
    }

    /// What every page's frame needs: its title, the CSRF token of its forms, the flash of
    /// the act that led here.
    func frame(_ who: DeskOperator?, title: String, _ values: [String: Any], request: Request? = nil) -> [String: Any] {
        var values = values
        values["title"] = title
        values["signedIn"] = who != nil
        values["csrf"] = who?.csrf ?? ""
        if let done = request?.uri.queryParameters["done"].map(String.init) { values["flash"] = Self.flashes[done] ?? "" }
        return values
    }

    static let flashes = [
        "resolved": "Resolved.", "suspended": "Suspended.", "reinstated": "Reinstated.", "verified": "Identity marked verified.",
        "taken_down": "Taken down.", "cancelled": "Cancelled.", "audited": "The money audit ran.", "hidden": "Hidden.",
        "audit_running": "The money audit is running already.",
    ]

    /// An operator's `reason`: 422 `reason_required` without one, as in the API.
    static func reason(_ form: [String: String]) throws -> String {
        let problems = OperatorReason.problems(form["reason"])
        if !problems.isEmpty { throw DomainError.invalid(problems) }
        return form["reason"]!
    }

    /// Where an act goes back to: a desk page, never elsewhere.
    static func back(_ form: [String: String], else fallback: String) -> String {
        guard let back = form["back"], back.hasPrefix("/desk/"), !back.contains("//"), !back.contains("?"),
            back.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "/" || $0 == "-" })
        else { return fallback }
        return back
    }
}

/// The last `audit money` run from the desk, for its health page, and whether one runs.
final class LastMoneyAudit: Sendable {
    private let last = Mutex<(at: Date, report: MoneyAudit.Report)?>(nil)
    private let running = Mutex(false)

    func keep(_ report: MoneyAudit.Report) { last.withLock { $0 = (Date(), report) } }
    var report: (at: Date, report: MoneyAudit.Report)? { last.withLock { $0 } }

    func begin() -> Bool {
        running.withLock { running in
            defer { running = true }
            return !running
        }
    }

    func end() { running.withLock { $0 = false } }
}

/// What verifying each checkpoint found, kept: the walk reads the whole log, so it is done
/// once per checkpoint, not on every page that shows it.
final class CheckpointVerdicts: Sendable {
    /// By the whole statement: a row that copied a good signature onto other figures is
    /// another checkpoint, verified afresh (and found not signed).
    private let verdicts = Mutex<[LogCheckpoint: (text: String, good: Bool)]>([:])

    func verdict(for checkpoint: LogCheckpoint) -> (text: String, good: Bool)? { verdicts.withLock { $0[checkpoint] } }

    func keep(_ verdict: (text: String, good: Bool), for checkpoint: LogCheckpoint) {
        verdicts.withLock { verdicts in
            if verdicts.count > 64 { verdicts.removeAll() }
            verdicts[checkpoint] = verdict
        }
    }
}

/// A page's request: who asks, and the path's parameters.
struct DeskVisit: Sendable {
    var request: Request
    var parameters: Parameters
    var who: DeskOperator

    func id(_ name: String) throws -> UUID { try parameters.requireUUID(name) }
    func query(_ name: String) -> String? { request.uri.queryParameters[Substring(name)].map(String.init) }
}

/// An act's request: who acts, the path's parameters, the form's fields.
struct DeskAct: Sendable {
    var request: Request
    var parameters: Parameters
    var form: [String: String]
    var who: DeskOperator

    func id(_ name: String) throws -> UUID { try parameters.requireUUID(name) }
}
