import Foundation
import Marketplace
import Postgres

extension Day {
    /// The day as a typed `date` parameter (`PostgresDate`): read once, not cast on every row
    /// a condition on it filters.
    public var sql: PostgresDate { PostgresDate(description) }
}

/// A typed identifier binds and reads as its `uuid`: rows and folds hold `UserID`, `LoanID` …,
/// never a bare `UUID` that could be another kind's.
extension Identifier: PostgresCodable {
    public var postgresBinding: PostgresBinding { rawValue.postgresBinding }
    public static var postgresTypes: Set<PostgresType> { UUID.postgresTypes }
    public static func reads(_ type: PostgresType) -> Bool { UUID.reads(type) }
    public init?(postgresText text: String, type: PostgresType) {
        guard let uuid = UUID(postgresText: text, type: type) else { return nil }
        self.init(uuid)
    }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>, type: PostgresType) {
        guard let uuid = UUID(postgresBytes: bytes, type: type) else { return nil }
        self.init(uuid)
    }
}

extension Identifier {
    /// No one's: a row's id before it is set.
    static var none: Self { Self(UUID.none) }
}
