-- paper_title: how a paper is named to a person: its title, or, for an untitled paper, the
-- first 14 words of its abstract (with "…" when the abstract goes on); paper_untitled
-- says which of the two a name is, so a page can set first words apart.
-- grain: scalar macros over one paper's title and abstract; every listing of papers
-- (diff, report, data-quality page) names papers with them, so all say the same.
-- upstream: none (created as temporary macros on the connection that reads papers).
create or replace temp macro paper_untitled(title) as nullif(trim(title), '') is null;

create or replace temp macro paper_title(title, abstract) as
    if(
        paper_untitled(title),
        array_to_string(regexp_split_to_array(trim(abstract), '\s+')[1:14], ' ')
        || if(len(regexp_split_to_array(trim(abstract), '\s+')) > 14, '…', ''),
        trim(title)
    );
