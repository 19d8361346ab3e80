# unwind_make.mk: a small makefile for tests/unwind.sh (make -n: make parses,
# expands and runs $(shell), which is what allocates).
WORDS ?= /dev/null
OBJS := $(patsubst %,obj/%.o,$(shell seq 1 60))
COUNT := $(shell wc -l < $(WORDS))
all: $(OBJS) report
obj/%.o: src/%.c
	@echo cc -c $< -o $@ $(COUNT)
src/%.c:
	@echo gen $@
report: $(OBJS)
	@echo $(words $(OBJS)) objects $(foreach o,$(OBJS),$(notdir $(o)))
