-- topics: one row per topic with its size, a label from its most distinctive terms, and
-- its centroid (matched against the next version's topics to keep ids stable).
-- grain: one row per topic_id.
-- upstream: paper_topics, topic_terms, topic_centroids.
-- A label is the topic's first three terms, a phrase in place of its words (it says them
-- already); where two topics would read the same (as a set of terms), the one with the
-- larger id takes one term more.
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

ranked_labels as (
    select
        topic_id,
        terms,
        row_number() over (
            partition by list_sort(terms[1:3]) order by topic_id
        ) as same_label_rank
    from label_terms
),

labels as (
    select
        topic_id,
        array_to_string(terms[1:case when same_label_rank > 1 then 4 else 3 end], ', ')
            as label
    from ranked_labels
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
