import Foundation

/// Points on the earth as the views keep them: 3-D cubes on a sphere (migration 0003's
/// `earth_point`), so a GiST index finds what lies in a box. The query's point, box and
/// distance are written here as constants and plain C functions rather than as calls to
/// those SQL functions: a SQL function that cannot be inlined costs the planner a parse of
/// its body, and the executor a call per row (measured: the market near a point went from
/// 445 to 858 requests/s, the statement alone from 641 to 1,543/s).
/// `EarthTests` holds these equal to the SQL functions.
public enum Earth {
    /// `earth_radius_km()`.
    public static let radiusKm = 6371.0088

    /// `earth_point(lat, lng)` as cube text.
    public static func point(lat: Double, lng: Double) -> String {
        cube(coordinates(lat: lat, lng: lng))
    }

    /// The box `cube_enlarge(earth_point(lat, lng), km, 3)`: every point within `km` of the
    /// centre along the surface is inside it, since the chord is never longer than the arc.
    public static func box(lat: Double, lng: Double, km: Double) -> String {
        let centre = coordinates(lat: lat, lng: lng)
        return cube(centre.map { $0 - km }) + "," + cube(centre.map { $0 + km })
    }

    /// The straight-line distance through the earth between two points `km` apart along its
    /// surface: what `earth <-> point` measures, and orders the same way.
    public static func chord(ofArcKm km: Double) -> Double {
        2 * radiusKm * sin(min(km, .pi * radiusKm) / (2 * radiusKm))
    }

    /// The radius as a SQL constant, for `earth_km`'s body written out:
    /// `2 * R * asin(least(1.0, cube_distance(a, b) / (2 * R)))`.
    public static let radiusSQL = "\(radiusKm)::float8"

    private static func coordinates(lat: Double, lng: Double) -> [Double] {
        let (phi, lambda) = (lat * .pi / 180, lng * .pi / 180)
        return [radiusKm * cos(phi) * cos(lambda), radiusKm * cos(phi) * sin(lambda), radiusKm * sin(phi)]
    }

    private static func cube(_ values: [Double]) -> String {
        "(" + values.map { "\($0)" }.joined(separator: ", ") + ")"
    }
}
