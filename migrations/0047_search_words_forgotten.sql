-- The jobs forget the search words no listing shows any more (a forgotten poster's texts
-- read `[removed]`; their words must not outlive them in the lexicon): SearchWords.prune.
GRANT DELETE ON search_words TO lender_app;
