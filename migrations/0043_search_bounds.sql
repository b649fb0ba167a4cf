-- Review of search (issue 55):
-- * levenshtein_less_equal refuses strings over 255 characters: a learned word that long, or
--   a folded query word that long ("ﬃ" a hundred times is 300 letters), made a search a 500.
--   Words over 64 letters are not learned (`SearchWords.learn`), and no typo is looked for in
--   a word that long.
-- * A saved search is matched against one posting's words at a time, where a prefix costs
--   nothing: its words are kept as prefixes (with their typos' corrections), not spelled out
--   as the words known when it was saved, which would never meet a word learned later.
CREATE OR REPLACE FUNCTION search_choices(given text) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    folded text := search_fold(given);
BEGIN
    IF folded IS NULL OR folded = '' THEN
        RETURN '{}';
    END IF;
    IF length(folded) < 5 OR length(folded) > 64
       OR EXISTS (SELECT FROM search_words WHERE word >= folded AND word < folded || chr(1114111)) THEN
        RETURN ARRAY[folded];
    END IF;
    RETURN ARRAY[folded] || ARRAY(
        SELECT w.word::text FROM search_words w
        WHERE length(w.word) BETWEEN length(folded) - 1 AND length(folded) + 1
          AND (levenshtein_less_equal(w.word, folded, 1) <= 1
               OR w.word = ANY (ARRAY(
                   SELECT overlay(folded PLACING substr(folded, i + 1, 1) || substr(folded, i, 1) FROM i FOR 2)
                   FROM generate_series(1, length(folded) - 1) AS i)))
        ORDER BY w.word
        LIMIT 20);
END
$$;

-- The words of a saved search: each a prefix, or one of its typo's corrections.
CREATE FUNCTION search_prefix_query(words text[]) RETURNS tsquery
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    given   text;
    choices text[];
    groups  text[] := '{}';
BEGIN
    FOREACH given IN ARRAY coalesce(words, '{}') LOOP
        choices := search_choices(given);
        CONTINUE WHEN cardinality(choices) = 0;
        groups := groups || ('(' || quote_literal(choices[1]) || ':*'
            || coalesce((SELECT string_agg(' | ' || quote_literal(c), '') FROM unnest(choices[2:]) AS c), '') || ')');
    END LOOP;
    IF cardinality(groups) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN to_tsquery('pg_catalog.simple', array_to_string(groups, ' & '));
END
$$;

-- Words learned before this bound that are longer than it.
DELETE FROM search_words WHERE length(word) > 64;
