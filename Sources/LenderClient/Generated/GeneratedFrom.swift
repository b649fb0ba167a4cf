// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "14df72f322e80f63a0f324cc5170b8f1eeef195fcbc4673b71b152c74ebcf16b"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "7ea2e091067953440cc0b6b9825f1acceb355ef7ec6ff641e1dd51811d1631d3"
}
