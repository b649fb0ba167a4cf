// Written by scripts/generate-client: what the code beside it was generated from.
// LenderClientTests compares these digests with the files, so stale code fails the suite.
public enum GeneratedFrom {
    public static let generatorVersion = "1.14.3"
    public static let documentSHA256 = "6fb9712114c85b925fed45bad5375c943aa6d104405ee52f3858b3da0f30e099"
    public static let configurationSHA256 = "cf0a5dbd7377a72d136d9dd41fb51e2f57f0b4e855fd7951eb9626f819a11b8b"
    /// The generated files beside this one, in the C locale's order of their names, as one text.
    public static let generatedSHA256 = "511b87f70c81b2426001dfa0f3f0c2854e313ca3908d5950541b652c88b9b780"
}
