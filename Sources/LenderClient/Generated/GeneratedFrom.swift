// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "6cb56ae5d2c6f0cdb7dd33a076a861b05faf20de6fcfab805692c5fad61a2f10"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "1fbe5063681a43d6f24b7feee77fbb685518043d41ee57746ead1cd535af8a49"
}
