-- duplicate_keys: the rows whose key (the columns put in place of __columns__) occurs more
-- than once, as Great Expectations' uniqueness expectations count them; rows whose key
-- values are all missing were left out by the caller.
-- grain: one row per offending row, its row_number, in table order.
-- upstream: `checked` (row_number and the key columns), registered by the caller.
select row_number
from checked
qualify count(*) over (partition by __columns__) > 1
order by row_number
