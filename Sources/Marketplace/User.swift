import Foundation

// MARK: Events (stream `user-{userID}`)

public struct UserRegistered: EventBody, Hashable {
    public static let eventType = "UserRegistered"
    public var userID: UserID
    public var handle: String
    public var displayName: String
    public var email: String
    public var country: String?

    public init(userID: UserID, handle: String, displayName: String, email: String, country: String? = nil) {
        self.userID = userID
        self.handle = handle
        self.displayName = displayName
        self.email = email
        self.country = country
    }
}

public struct ProfileUpdated: EventBody, Hashable {
    public static let eventType = "ProfileUpdated"
    public var displayName: String?
    public var country: String?
    public var defaultShareCents: Int?

    public init(displayName: String? = nil, country: String? = nil, defaultShareCents: Int? = nil) {
        self.displayName = displayName
        self.country = country
        self.defaultShareCents = defaultShareCents
    }
}

public struct UserBlocked: EventBody, Hashable {
    public static let eventType = "UserBlocked"
    public var userID: UserID

    public init(userID: UserID) {
        self.userID = userID
    }
}

public struct UserUnblocked: EventBody, Hashable {
    public static let eventType = "UserUnblocked"
    public var userID: UserID

    public init(userID: UserID) {
        self.userID = userID
    }
}

/// The person closed their account and is forgotten: their data key is destroyed with this
/// event, so what the log holds sealed about them reads as removed from now on.
public struct UserForgotten: EventBody, Hashable {
    public static let eventType = "UserForgotten"
    public var userID: UserID

    public init(userID: UserID) {
        self.userID = userID
    }
}

/// The user proved the address they registered with is theirs (a code mailed to it).
public struct EmailVerified: EventBody, Hashable {
    public static let eventType = "EmailVerified"

    public init() {}
}

/// A new password, by its owner (`byReset`: through a link mailed to them). The hash is not
/// the log's: it is in `credentials`, changed in the same transaction.
public struct PasswordChanged: EventBody, Hashable {
    public static let eventType = "PasswordChanged"
    public var byReset: Bool

    public init(byReset: Bool) {
        self.byReset = byReset
    }
}

public enum UserEvent: Hashable, Sendable {
    case registered(UserRegistered)
    case forgotten(UserForgotten)
    case profileUpdated(ProfileUpdated)
    case blocked(UserBlocked)
    case unblocked(UserUnblocked)
    case cardAdded(PaymentCardAdded)
    case cardExpiryUpdated(PaymentCardExpiryUpdated)
    case cardRemoved(PaymentCardRemoved)
    case fundsDeposited(FundsDeposited)
    case balanceDebited(BalanceDebited)
    case cardCharged(CardCharged)
    case balanceCredited(BalanceCredited)
    case photoChanged(ProfilePhotoChanged)
    case rentalHoldPlaced(RentalHoldPlaced)
    case rentalHoldReleased(RentalHoldReleased)
    case rentalPaid(RentalPaid)
    case rentalRefunded(RentalRefunded)
    case rentalEarned(RentalEarned)
    case emailVerified(EmailVerified)
    case passwordChanged(PasswordChanged)
    case payoutMethodSet(PayoutMethodSet)
    case payoutRequested(PayoutRequested)
    case payoutSent(PayoutSent)
    case payoutFailed(PayoutFailed)
    case identityVerified(IdentityVerified)
    case balanceSettled(BalanceSettled)
    case suspended(UserSuspended)
    case reinstated(UserReinstated)
}

// MARK: Commands

public enum UserCommand: Hashable, Sendable {
    /// The password is checked here and never leaves the command: it is not in any event.
    case register(userID: UserID, handle: String, displayName: String, email: String, password: String, country: String?)
    case updateProfile(displayName: String?, country: String?, defaultShareCents: Int?)
    case block(UserID)
    case unblock(UserID)
    /// A card that passed `CardRules`, as it may be kept. The same fingerprint again is the
    /// same card: no second one, its expiry updated.
    case addCard(CardOnFile)
    case removeCard(CardID)
    /// Recorded after the processor approved `chargeID`; the rules are checked before charging too.
    case deposit(amountCents: Int, cardID: CardID, chargeID: String, today: Day)
    /// Closes the account for good (the password was checked before, like registration's).
    case forget
    /// The profile's one photo: a digest replaces the one there; nil removes it.
    case setPhoto(digest: String?)
    /// The code mailed to the address was given back (checked before: it is not the log's).
    case verifyEmail
    /// A new password was set (checked and hashed before: neither is the log's).
    case changePassword(byReset: Bool)
    /// Payouts (SPEC §12.3): where they go, one asked for, its transfer's outcome, and an
    /// operator's check of who the user is.
    case setPayoutMethod(token: String)
    case requestPayout(PayoutRequest)
    case recordPayout(PayoutID, PayoutOutcome)
    /// `reason`: the operator's, when the desk or the admin API records it.
    case verifyIdentity(by: String, reason: String? = nil)
    /// An operator's settlement of the whole available balance outside Lender.
    case settleBalance(by: String, reason: String)
    /// An operator's sanction (SPEC §12.5), and its end: by an operator, or (`by` nil) by the
    /// jobs once `until` passed.
    case suspend(by: UserID, reason: String, until: Date?, now: Date)
    case reinstate(by: UserID?, reason: String, now: Date)
}

// MARK: Decider

public struct UserState: Hashable, Sendable {
    public var userID: UserID?
    public var handle = ""
    public var displayName = ""
    public var email = ""
    public var country: String?
    public var defaultShareCents: Int?
    public var blocked: Set<UserID> = []
    /// In the order added.
    public var cards: [CardOnFile] = []
    /// Everything the user has here, holds included.
    public var balanceCents = 0
    /// The part of the balance held for rental bids: not available to spend.
    public var heldCents = 0
    public var availableCents: Int { balanceCents - heldCents }
    /// Every processor charge recorded on this stream (deposits, card payments).
    public var chargeIDs: Set<String> = []
    /// Closed and forgotten: no command of theirs is taken any more.
    public var forgotten = false
    /// The profile photo's digest.
    public var photo: String?
    /// The registered address proved theirs (SPEC §12.4).
    public var emailVerified = false
    /// Where payouts go (a processor's token), every payout asked for, and whether an
    /// operator checked who they are (SPEC §12.3).
    public var payoutToken: String?
    public var payouts: [Payout] = []
    public var identityVerified = false
    /// An operator's suspension, until it ends (SPEC §12.5).
    public var suspension: Suspension?

    public var exists: Bool { userID != nil && !forgotten }
    public init() {}
}

public enum UserDecider {
    public static let initial = UserState()

    public static let shareSizes: Set<Int> = [2500, 5000, 7500, 10000]

    /// Handle uniqueness across users is not this stream's to know: the gateway claims the
    /// handle in the same append (a `handle-{name}` stream written with `.noStream`).
    public static func decide(_ command: UserCommand, _ state: UserState) throws -> [UserEvent] {
        switch command {
        case .register(let userID, let handle, let displayName, let email, let password, let country):
            guard state.userID == nil else { throw DomainError.userExists }
            try DomainError.throwIfAny(
                givenRegistrationProblems(handle: handle, displayName: displayName, email: email, password: password, country: country))
            return [
                .registered(
                    UserRegistered(
                        userID: userID, handle: handle, displayName: normalizedDisplayName(displayName), email: email.lowercased(),
                        country: country))
            ]

        case .updateProfile(let displayName, let country, let defaultShareCents):
            guard state.exists else { throw DomainError.userNotFound }
            var validation = Validation()
            if let displayName { validation.add(displayNameProblems(displayName)) }
            validation.add(countryProblems(country))
            if let defaultShareCents {
                validation.check(
                    shareSizes.contains(defaultShareCents), "defaultShareCents", "invalid_share",
                    "one of 2500, 5000, 7500, 10000")
            }
            validation.check(
                displayName != nil || country != nil || defaultShareCents != nil, "body", "nothing_to_change",
                "give at least one of displayName, country, defaultShareCents")
            try validation.throwIfInvalid()
            return [
                .profileUpdated(
                    ProfileUpdated(
                        displayName: displayName.map(normalizedDisplayName), country: country, defaultShareCents: defaultShareCents))
            ]

        case .block(let other):
            guard state.exists, let me = state.userID else { throw DomainError.userNotFound }
            guard other != me else { throw Self.cannotBlockSelf("You cannot block yourself.") }
            return state.blocked.contains(other) ? [] : [.blocked(UserBlocked(userID: other))]

        case .unblock(let other):
            guard state.exists, let me = state.userID else { throw DomainError.userNotFound }
            guard other != me else { throw Self.cannotBlockSelf("You cannot unblock yourself.") }
            return state.blocked.contains(other) ? [.unblocked(UserUnblocked(userID: other))] : []

        case .addCard(let card):
            guard state.exists else { throw DomainError.userNotFound }
            guard let known = state.cards.first(where: { $0.fingerprint == card.fingerprint }) else {
                return [.cardAdded(card)]
            }
            return (known.expMonth, known.expYear) == (card.expMonth, card.expYear)
                ? []
                : [.cardExpiryUpdated(PaymentCardExpiryUpdated(cardID: known.cardID, expMonth: card.expMonth, expYear: card.expYear))]

        case .removeCard(let cardID):
            guard state.cards.contains(where: { $0.cardID == cardID }) else {
                throw DomainError.cardNotFound
            }
            return [.cardRemoved(PaymentCardRemoved(cardID: cardID))]

        case .forget:
            guard state.exists, let me = state.userID else { throw DomainError.userNotFound }
            try checkForgettable(state)
            return [.forgotten(UserForgotten(userID: me))]

        case .setPayoutMethod(let token):
            guard state.exists else { throw DomainError.userNotFound }
            try DomainError.throwIfAny(payoutTokenProblems(token))
            return token == state.payoutToken ? [] : [.payoutMethodSet(PayoutMethodSet(token: token))]

        case .requestPayout(let request):
            return try decidePayout(request, state)

        case .recordPayout(let payoutID, let outcome):
            return try decidePayoutOutcome(payoutID, outcome, state)

        case .verifyIdentity(let verifier, let reason):
            guard state.exists else { throw DomainError.userNotFound }
            return state.identityVerified ? [] : [.identityVerified(IdentityVerified(verifiedBy: verifier, reason: reason))]

        case .settleBalance(let by, let reason):
            return try decideSettlement(by, reason: reason, state)

        case .suspend(let operatorID, let reason, let until, let now):
            return try suspend(by: operatorID, reason: reason, until: until, now: now, state)

        case .reinstate(let operatorID, let reason, let now):
            return try reinstate(by: operatorID, reason: reason, now: now, state)

        case .verifyEmail:
            guard state.exists else { throw DomainError.userNotFound }
            return state.emailVerified ? [] : [.emailVerified(EmailVerified())]

        case .changePassword(let byReset):
            guard state.exists else { throw DomainError.userNotFound }
            return [.passwordChanged(PasswordChanged(byReset: byReset))]

        case .setPhoto(let digest):
            guard state.exists else { throw DomainError.userNotFound }
            if let digest { try Photos.checkDigest(digest) }
            guard digest != state.photo else { return [] }
            if digest == nil, state.photo == nil { throw DomainError(.notFound, "photo_not_found", "No profile photo.") }
            return [.photoChanged(ProfilePhotoChanged(digest: digest))]

        case .deposit(let amount, let cardID, let chargeID, let today):
            _ = try checkDeposit(amountCents: amount, cardID: cardID, state, today: today)
            try checkNewCharge(chargeID, in: state)
            return [.fundsDeposited(FundsDeposited(amountCents: amount, cardID: cardID, chargeID: chargeID))]
        }
    }

    public static func evolve(_ state: UserState, _ event: UserEvent) -> UserState {
        var state = state
        switch event {
        case .registered(let registered):
            state.userID = registered.userID
            state.handle = registered.handle
            state.displayName = registered.displayName
            state.email = registered.email
            state.country = registered.country
        case .forgotten:
            state.forgotten = true
            state.displayName = ""
            state.email = ""
            state.country = nil
            state.cards = []
            state.photo = nil
            state.payoutToken = nil
        case .profileUpdated(let updated):
            if let displayName = updated.displayName { state.displayName = displayName }
            if let country = updated.country { state.country = country }
            if let share = updated.defaultShareCents { state.defaultShareCents = share }
        case .blocked(let blocked):
            state.blocked.insert(blocked.userID)
        case .unblocked(let unblocked):
            state.blocked.remove(unblocked.userID)
        case .cardAdded(let card):
            state.cards.append(card)
        case .cardExpiryUpdated(let updated):
            if let index = state.cards.firstIndex(where: { $0.cardID == updated.cardID }) {
                state.cards[index].expMonth = updated.expMonth
                state.cards[index].expYear = updated.expYear
            }
        case .cardRemoved(let removed):
            state.cards.removeAll { $0.cardID == removed.cardID }
        case .fundsDeposited, .balanceDebited, .balanceCredited, .rentalHoldPlaced, .rentalHoldReleased, .rentalRefunded,
            .rentalEarned, .passwordChanged:
            break
        case .emailVerified:
            state.emailVerified = true
        case .cardCharged(let charged):
            state.chargeIDs.insert(charged.chargeID)
        case .rentalPaid(let paid):
            if let chargeID = paid.chargeID { state.chargeIDs.insert(chargeID) }
        case .photoChanged(let changed):
            state.photo = changed.digest
        case .payoutMethodSet, .payoutRequested, .payoutSent, .payoutFailed, .identityVerified, .balanceSettled:
            evolvePayouts(&state, event)
        case .suspended(let suspended):
            state.suspension = Suspension(until: suspended.until)
        case .reinstated:
            state.suspension = nil
        }
        if case .fundsDeposited(let deposit) = event { state.chargeIDs.insert(deposit.chargeID) }
        let change = balanceChange(of: event)
        state.balanceCents += change.balanceCents
        state.heldCents += change.heldCents
        return state
    }

    // MARK: Field rules

    /// Money is never forgotten with its owner: a balance is paid out first (409
    /// `balance_not_empty`), or settled by an operator, and a payout on its way is recorded
    /// first (409 `payout_pending`: its outcome may credit the amount back).
    public static func checkForgettable(_ state: UserState) throws {
        guard state.balanceCents == 0 else {
            throw DomainError(
                .conflict, "balance_not_empty",
                "Your balance holds \(state.balanceCents) cents: pay it out first (POST /v1/me/payouts).")
        }
        guard !state.payouts.contains(where: { $0.status == .pending }) else { throw payoutPending }
    }

    public static func isValidHandle(_ handle: String) -> Bool {
        (3...32).contains(handle.count)
            && handle.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" }
    }

    /// One `@`, a non-empty local part, a dotted domain, no spaces: what a form would accept.
    public static func isValidEmail(_ email: String) -> Bool {
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard email.count <= 254, parts.count == 2, !parts[0].isEmpty, parts[0].count <= 64 else { return false }
        let domain = parts[1]
        let labels = domain.split(separator: ".", omittingEmptySubsequences: false)
        return labels.count >= 2 && labels.allSatisfy { !$0.isEmpty }
            && !email.contains(where: { $0.isWhitespace || $0.isNewline })
    }

    /// One line of 1 to 80 characters, with nothing invisible in it: no control, zero-width or
    /// direction-changing characters, with which a name could pass for another's handle.
    /// Registration's field rules, over the fields given: the decider's, and an edge's that
    /// refuses a request for a missing field and names every other bad one with it.
    public static func givenRegistrationProblems(
        handle: String?, displayName: String?, email: String?, password: String?, country: String?
    ) -> [FieldError] {
        var validation = Validation()
        if let handle { validation.check(isValidHandle(handle), "handle", "invalid_handle", "3 to 32 of a-z, 0-9 and _") }
        if let displayName { validation.add(displayNameProblems(displayName)) }
        if let email { validation.check(isValidEmail(email), "email", "invalid_email", "not a well-formed e-mail address") }
        // A control character (NUL above all: C strings end there) would make two passwords one.
        if let password {
            validation.check(
                (10...128).contains(password.count) && !password.unicodeScalars.contains(where: \.isControl),
                "password", "invalid_password", "10 to 128 characters, none of them a control character")
        }
        validation.add(countryProblems(country))
        return validation.problems
    }

    /// Blocking or unblocking oneself: a 422 naming the user given.
    static func cannotBlockSelf(_ message: String) -> DomainError {
        DomainError(
            .invalid, "cannot_block_self", message,
            fields: [FieldError(field: "userId", code: "cannot_block_self", message: "another user's id, not your own")])
    }

    static func displayNameProblems(_ name: String) -> [FieldError] {
        name.trimmed.isWithin(1...80) && normalizedDisplayName(name).isWithin(1...80) && !name.contains(where: \.isNewline)
            && !name.unicodeScalars.contains(where: \.isControl) && !name.contains(where: \.hidesFormatCharacter)
            && !name.unicodeScalars.allSatisfy(\.showsNothing)
            ? []
            : [
                FieldError(
                    field: "displayName", code: "invalid_display_name",
                    message: "1 to 80 characters, one line, without invisible or direction-changing characters")
            ]
    }

    /// A display name as stored: trimmed, and in Unicode's compatibility composed form (NFKC),
    /// so that two spellings of one name are one and a name reads as it looks: full-width
    /// `Ｂｏｂ` is `Bob`, `ﬁ` is `fi`, `²` is `2` (issue 48's look-alikes). Checked again after
    /// folding, since a fold can lengthen a name (`㍿` is four letters).
    static func normalizedDisplayName(_ name: String) -> String {
        name.trimmed.precomposedStringWithCompatibilityMapping
    }

    /// An ISO 3166-1 alpha-2 code of the list in `Countries`.
    static func countryProblems(_ country: String?, field: String = "country") -> [FieldError] {
        guard let country else { return [] }
        return Countries.alpha2.contains(country)
            ? [] : [FieldError(field: field, code: "invalid_country", message: "an ISO 3166-1 alpha-2 code, like NP")]
    }
}

extension String {
    var trimmed: String { trimmingWhiteSpace() }
}

extension StringProtocol {
    /// Without white space around it: `whitespacesAndNewlines`, or only `whitespaces` (spaces
    /// and tabs) without `newlines`. Most text has none, as its first and last characters say
    /// alone; Foundation's trim bridges through `NSString` every time (a title's and a bearer
    /// token's were 2.7% of a posting's CPU, `perf`).
    public func trimmingWhiteSpace(newlines: Bool = true) -> String {
        if let first = unicodeScalars.first, let last = unicodeScalars.last, first.isVisibleASCII, last.isVisibleASCII {
            return String(self)
        }
        return trimmingCharacters(in: newlines ? .whitespacesAndNewlines : .whitespaces)
    }
}

extension Character {
    /// A character that holds an invisible format character (`isInvisibleFormat`), other than a
    /// zero-width joiner between two emoji: 👩‍💻 and 🏳️‍🌈 are one character each, written with
    /// U+200D, which the iOS keyboard sends; a joiner anywhere else is hiding something.
    var hidesFormatCharacter: Bool {
        let scalars = Array(unicodeScalars)
        return scalars.indices.contains { index in
            let scalar = scalars[index]
            guard scalar.isInvisibleFormat else { return false }
            guard scalar.value == 0x200D, index > 0, index < scalars.count - 1 else { return true }
            return !(scalars[index - 1].isEmojiPart && scalars[index + 1].isEmojiPart)
        }
    }
}

extension Unicode.Scalar {
    /// White space, and the fillers and blanks that draw nothing (Hangul fillers, the blank
    /// Braille pattern): a name of only these would show as no name.
    var showsNothing: Bool {
        properties.isWhitespace || isInvisibleFormat || [0x115F, 0x1160, 0x2800, 0x3164, 0xFFA0].contains(value)
    }

    /// A pictograph (not the digits and `#`/`*` that are emoji only with a keycap), or what
    /// follows one inside an emoji: a skin tone, or the variation selector that asks for the
    /// emoji's picture.
    var isEmojiPart: Bool {
        (value > 0x7F && properties.isEmoji) || properties.isEmojiModifier || value == 0xFE0F
    }

    /// `!` to `~`: ASCII that is neither white space nor a control character.
    public var isVisibleASCII: Bool { (0x21...0x7E).contains(value) }

    /// C0 and C1 control characters and DEL: never part of a name, a password or a query.
    public var isControl: Bool { value < 0x20 || (0x7F...0x9F).contains(value) }

    /// Zero-width characters, bidirectional marks, embeddings, overrides and isolates, and the
    /// byte-order mark: format characters that change how text shows without showing.
    public var isInvisibleFormat: Bool {
        (0x200B...0x200F).contains(value) || (0x202A...0x202E).contains(value) || (0x2060...0x2069).contains(value)
            || value == 0x061C || value == 0xFEFF
    }
}
