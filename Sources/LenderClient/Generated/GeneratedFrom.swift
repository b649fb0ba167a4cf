// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "2021ac339b3327dee8e6c93c1e777da4e9fe9284a9ae70d1050adb2b7e9e321a"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "ef944ab93089c8587dc9c89fe42e0a1c80f9f564d91a277fe941675a67cd77b6"
}
