-- topics: One row per topic with a readable label.
-- grain: one row per topic_id.
-- key: topic_id
-- reads: paper_topics, topic_terms, topic_centroids
-- columns:
--   topic_id: id, kept across versions where the topic persists
--   label: its three most distinctive terms
--   papers: papers in it
--   mean_distance: mean cosine distance of its papers to the centroid
--   top_terms: its terms by rank
--   centroid: mean vector
-- Each topic's centroid is matched against the next version's topics to keep ids stable.
-- A label is the topic's first three terms, a phrase in place of its words (it says them
-- already). Labels never read the same: a topic takes one term more, up to five, while its
-- label's set of terms is one a topic of a smaller id could read (its first three, four or
-- five terms); a topic whose every such set is taken (their terms are the same) adds its id.
with sizes as (
    select topic_id, count(*) as papers, round(avg(distance), 6) as mean_distance
    from paper_topics
    group by all
),

terms as (
    select
        topic_id,
        list(term order by term_rank) as top_terms
    from topic_terms
    group by all
),

-- A phrase takes the place of its best-ranked word, and its words leave the label.
phrase_words as (
    select topic_id, term, term_rank, unnest(string_split(term, ' ')) as word
    from topic_terms
    where contains(term, ' ')
),

phrases as (
    select
        phrase_words.topic_id,
        phrase_words.term,
        least(min(phrase_words.term_rank), min(words.term_rank)) as label_rank
    from phrase_words
    left join topic_terms as words
        on words.topic_id = phrase_words.topic_id and words.term = phrase_words.word
    group by all
),

single_words as (
    select topic_id, term, term_rank as label_rank
    from topic_terms as t
    where not contains(term, ' ')
      and not exists (
          select 1 from phrase_words as p where p.topic_id = t.topic_id and p.word = t.term
      )
),

label_terms as (
    select
        topic_id,
        list(term order by label_rank, term) as terms
    from (select * from phrases union all select * from single_words)
    group by all
),

-- Each topic's first 3, 4 and 5 label terms, as sets.
prefixes as (
    select
        topic_id,
        length,
        list_sort(terms[1:length]) as term_set
    from label_terms,
        unnest(generate_series(3, least(greatest(len(terms), 3), 5))) as lengths(length)
),

-- The fewest terms whose set no topic of a smaller id has among its prefixes.
free_lengths as (
    select topic_id, min(length) as length
    from prefixes as mine
    where not exists (
        select 1 from prefixes as theirs
        where theirs.topic_id < mine.topic_id and theirs.term_set = mine.term_set
    )
    group by all
),

labels as (
    select
        topic_id,
        case
            when free_lengths.length is null
                then array_to_string(terms[1:3], ', ') || ' (topic ' || topic_id || ')'
            else array_to_string(terms[1:free_lengths.length], ', ')
        end as label
    from label_terms
    left join free_lengths using (topic_id)
),

final as (
    select
        sizes.topic_id,
        coalesce(labels.label, '') as label,
        sizes.papers,
        sizes.mean_distance,
        coalesce(terms.top_terms, []) as top_terms,
        topic_centroids.centroid
    from sizes
    left join terms using (topic_id)
    left join labels using (topic_id)
    left join topic_centroids using (topic_id)
    order by sizes.topic_id
)

select * from final
