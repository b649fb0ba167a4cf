// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "a793188e6e06b5eefa5ddf14e7c06ad2a961e5758790edcadb40eff76a294a61"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "b72f07aef2365f440ed775c26d90f299916bad2ec15f31c22b768a324d18f33f"
}
