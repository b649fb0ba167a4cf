-- Search a renter would call good (SPEC §12.7, issue 55): `q` matches the words of the title
-- and the description, accents and case folded, with a typo forgiven in a longer word, and
-- ranks title matches above description ones.
--
-- The text search configuration is `simple` (lower-case, no stemming, no stop words), over
-- text folded by `unaccent`: listings are written in many languages (French, Nepali in Latin
-- letters, English) and an item says nothing of its language, so a language's stemmer would
-- mangle the others' words. What stemming gives ("drills" finding "drill") the query gets from
-- prefixes instead: each word of `q` matches the words it begins.
-- unaccent and fuzzystrmatch ship with PostgreSQL (contrib) and are trusted extensions: the
-- database's owner may add them.
CREATE EXTENSION IF NOT EXISTS unaccent;
CREATE EXTENSION IF NOT EXISTS fuzzystrmatch;

-- Folded text: lower-case, accents off ("Perçeuse" → "perceuse"). unaccent() is only STABLE
-- (its dictionary could change): the fold is declared IMMUTABLE to be stored, and names the
-- dictionary and schema itself so that it means one thing wherever it runs. PL/pgSQL, as the
-- other stored expressions (migration 0024), so that an insert does not parse it each time.
CREATE FUNCTION search_fold(text) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $$
BEGIN
    RETURN lower(public.unaccent('public.unaccent'::regdictionary, $1));
END
$$;

-- The words of a title (weight A) and a description (weight B).
CREATE FUNCTION stored_search_vector(title text, description text) RETURNS tsvector
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
    RETURN setweight(to_tsvector('pg_catalog.simple', coalesce(search_fold(title), '')), 'A')
        || setweight(to_tsvector('pg_catalog.simple', coalesce(search_fold(description), '')), 'B');
END
$$;

-- Stated once, beside the text it is made of: computed when a posting or a revision writes
-- the title or description (not when a bid or a status changes the row), and by a rebuild's
-- copies of these tables (LIKE ... INCLUDING ALL) as well.
ALTER TABLE items_view ADD COLUMN search tsvector GENERATED ALWAYS AS (stored_search_vector(title, description)) STORED;
CREATE INDEX items_view_search ON items_view USING gin (search) WHERE status = 'available';
ALTER TABLE loans_view ADD COLUMN search tsvector GENERATED ALWAYS AS (stored_search_vector(title, description)) STORED;
CREATE INDEX loans_view_search ON loans_view USING gin (search);
-- The title-only ILIKE search they replace.
DROP INDEX items_view_title_trgm;
DROP INDEX loans_view_title_trgm;

-- Every word the listings have used: what a misspelt word of `q` is corrected to. Learned by
-- the jobs from the rows written since they last looked (`position`), so it is not a view of
-- the log but a cache of the views: it only grows, and a rebuild leaves it be. C collation,
-- so that a prefix is a range of its index.
CREATE TABLE search_words (
    word text COLLATE "C" PRIMARY KEY
);
-- The log position up to which the items' and loans' rows have been read for words.
CREATE TABLE search_words_learned (
    only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    position bigint  NOT NULL DEFAULT 0
);
INSERT INTO search_words_learned DEFAULT VALUES;
GRANT SELECT, INSERT ON search_words TO lender_app;
GRANT SELECT, UPDATE ON search_words_learned TO lender_app;

-- The spellings a word of `q` may match (search_query's alternatives, without its prefix
-- mark): the folded word, and when it begins no known word, the known words one typo away.
CREATE FUNCTION search_choices(given text) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    folded text := search_fold(given);
BEGIN
    IF folded IS NULL OR folded = '' THEN
        RETURN '{}';
    END IF;
    IF length(folded) < 5 OR EXISTS (SELECT FROM search_words WHERE word >= folded AND word < folded || chr(1114111)) THEN
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

-- The tsquery for the words of `q` (already split into letters and digits by the server): each
-- word matches the words it begins ('dril' finds 'drill', 'drills'); a word of five letters or
-- more that begins no known word also matches the known words one edit away (a letter added,
-- dropped, changed, or two neighbours swapped: 'drlil' finds 'drill'). All words must match.
-- NULL when no word is left. Each lexeme is quoted, so nothing a user types is tsquery syntax.
CREATE FUNCTION search_query(words text[]) RETURNS tsquery
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
