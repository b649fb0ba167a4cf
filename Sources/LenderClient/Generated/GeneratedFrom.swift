// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "40436a9281a2c19d68852d439aebd369000a95504da94c6e1920eab139ee9323"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "cc03deae58a47f6eb6ce24d06fbe27e16a8cfc1325434c7d7481416ae00cb534"
}
