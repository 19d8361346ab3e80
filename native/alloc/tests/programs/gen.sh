#!/usr/bin/env bash
# Generate the inputs of the real-program tests into $1 (deterministic).
set -euo pipefail
out=$1
mkdir -p "$out"
# text for gawk: deterministic pseudo-random words
awk 'BEGIN { srand(7); split("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon", w, " ");
  for (l = 0; l < 6000; l++) { s = ""; k = 3 + int(rand() * 12); for (i = 0; i < k; i++) s = s w[1 + int(rand() * 20)] (int(rand()*4)==0 ? int(rand()*100) : "") " "; print s } }' > "$out/text.txt"
# SQL for sqlite3
cat > "$out/work.sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, a INTEGER, b TEXT, c REAL);
WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 40000)
INSERT INTO t SELECT i, (i * 7919) % 1000, printf('name-%d-%s', i % 977, hex(i * 31)), i * 0.5 FROM s;
CREATE INDEX ta ON t(a);
CREATE TABLE u AS SELECT a, count(*) AS n, sum(c) AS sc, group_concat(id) AS ids FROM t GROUP BY a;
SELECT count(*), sum(n), round(sum(sc), 1), max(length(ids)) FROM u;
SELECT a, n FROM u ORDER BY n DESC, a LIMIT 5;
SELECT count(*) FROM t JOIN u USING (a) WHERE t.id % 13 = 0 AND u.n > 39;
UPDATE t SET b = b || upper(b) WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
SELECT count(*), sum(length(b)), min(b), max(b) FROM t;
SELECT b FROM t WHERE b LIKE 'name-12-%' ORDER BY id LIMIT 3;
CREATE TABLE v(k TEXT PRIMARY KEY, v BLOB) WITHOUT ROWID;
INSERT INTO v SELECT b || id, zeroblob(id % 500) FROM t WHERE id < 10000;
SELECT count(*), sum(length(v)) FROM v;
VACUUM;
SELECT count(*) FROM t;
SQL
# a makefile with a dependency graph, functions and recipes
{
    echo 'N := $(shell seq 1 200)'
    echo 'OBJS := $(patsubst %,obj%.o,$(N))'
    echo 'all: $(OBJS)'
    echo '	@echo linked $(words $^) objects: $(sort $(filter obj1%,$^))'
    echo 'obj%.o: src%.c'
    echo '	@echo cc $< -o $@ $(if $(filter %5.c,$<),-DFIVE,)'
    for i in $(seq 1 200); do
        printf 'src%d.c: %s\n\t@:\n' "$i" "$( [ "$i" -gt 1 ] && echo "hdr$((i % 17)).h" )"
    done
    for i in $(seq 0 16); do printf 'hdr%d.h:\n\t@:\n' "$i"; done
    echo 'VARS := $(foreach i,$(N),$(eval V$(i) := value-$(i)-$(words $(N)))V$(i))'
    echo '$(info $(words $(VARS)) variables, V199 = $(V199))'
    echo '.PHONY: all $(patsubst %,src%.c,$(N)) $(patsubst %,hdr%.h,$(shell seq 0 16))'
} > "$out/work.mk"
