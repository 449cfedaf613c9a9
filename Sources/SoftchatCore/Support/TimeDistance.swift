extension Int64 {
    /// Whether `self` lies at most `bound` from `other` (|self − other| ≤ bound), for every pair
    /// of values: a `created_at` of 2^63 − 1 against a negative clock is simply far, where
    /// `abs(self - other)` would trap on the subtraction.
    ///
    /// - Parameters:
    ///   - bound: The largest distance allowed; a negative bound allows nothing.
    ///   - other: The value to measure from.
    /// - Returns: True when the distance fits the bound.
    package func isWithin(_ bound: Int64, of other: Int64) -> Bool {
        let (difference, overflow) = subtractingReportingOverflow(other)
        return bound >= 0 && !overflow && difference.magnitude <= bound.magnitude
    }
}
