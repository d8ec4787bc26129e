-- mention_value, mention_context: the number a metric's mention reports ("FID of 1.02"
-- gives 1.02) and up to 60 characters either side of a mention, for a vocabulary pattern
-- (RE2) and an abstract.
-- grain: scalar macros over one (pattern, abstract); sql/mentions.sql calls them.
-- upstream: mention_vocabulary. flows/derive/mentions.py (stage_vocabulary) writes each line
-- that starts with "when 'PATTERN'" once per pattern of the vocabulary, PATTERN replaced
-- by it, so that every regular expression here is a constant DuckDB compiles once a query:
-- built from a column, it is compiled again for every row. For a query over a few papers
-- it writes the other form: each macro is its branch alone, PATTERN replaced by the row's
-- pattern (compiled for each mention, cheaper than the whole case for one abstract).
create or replace temp macro mention_value(pattern, abstract) as
    case pattern
        when 'PATTERN' then regexp_extract(abstract, '(?:PATTERN)\s*(?:score\s+)?(?:of|=|:|at|to|is)?\s*([0-9]+(?:\.[0-9]+)?%?)', 1)
    end;

create or replace temp macro mention_context(pattern, abstract) as
    case pattern
        when 'PATTERN' then regexp_extract(abstract, '.{0,60}(?:PATTERN).{0,60}', 0)
    end;
