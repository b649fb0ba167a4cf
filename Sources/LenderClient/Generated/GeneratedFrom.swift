// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "4257bacef636c9c456fc453abfeec2492b9b784d0352d05cc84bc3497bb3369a"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "8ef573b5e8e667050908ab8924c691b40b5fd7847610592e0330fb28b58f7198"
}
