extension Lender {
    /// `lender --version`: the release this source is (SPEC §12 is the third). `scripts/release`
    /// names its tarball after it, and writes the commit it was built from beside the binary.
    static let version = "0.3.0"
}
