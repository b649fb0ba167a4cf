import Foundation
import Marketplace
import Testing

@Suite("Days")
struct DayTests {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// An instant's day by arithmetic is Foundation's UTC Gregorian day: at random instants
    /// from 1500 to 10000 (Foundation's own answer outside 1600–9999), and a second either side
    /// of the edges.
    @Test func anInstantsDayIsFoundationsUTCDay() {
        var generator = SystemRandomNumberGenerator()
        let from = -14_831_769_600.0, until = 253_402_300_800.0  // 1500-01-01, 10000-01-01
        var instants = (0..<20_000).map { _ in Double.random(in: from..<until, using: &generator) }
        for edge in [-11_676_096_000.0, 0, 253_402_300_799, 951_782_400, 4_107_542_400] {  // 1600, 1970, 9999-12-31, 2000-02-29, 2100-03-01
            instants += [edge - 1, edge - 0.5, edge, edge + 0.5, edge + 1]
        }
        for seconds in instants {
            let date = Date(timeIntervalSince1970: seconds)
            let parts = Self.utc.dateComponents([.year, .month, .day], from: date)
            let day = Day(date)
            #expect([day.year, day.month, day.day] == [parts.year, parts.month, parts.day], "\(date)")
        }
    }

    @Test func onlyYYYYMMDDInASCIIDigitsIsADay() {
        #expect(Day("2026-11-25") == Day(year: 2026, month: 11, day: 25))
        #expect(Day("2024-02-29") != nil && Day("0001-01-01") != nil && Day("9999-12-31") != nil)
        for text in [
            "2026-1-01", "2026-01-1", "２０２６-01-01", "2026-02-30", "2023-02-29", "2026/01/01", "+026-01-01", " 2026-01-01",
            "2026-01-01 ", "0000-01-01", "2026-13-01", "2026-00-10", "2026-01-00", "", "20260101", "2026-01-0a", "2026—01-01",
        ] {
            #expect(Day(text) == nil, "\(text)")
        }
        #expect(Day("2026-11-25")?.description == "2026-11-25")
    }
}
