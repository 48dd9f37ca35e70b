# Entry points: `make demo` (profile the bundled trainer), `make check` (all tests, with the
# ASan+UBSan and TSan builds). Both install missing Debian packages first when run as root.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build demo check test check-asan check-tsan bench lint clean

all: build

deps:
	@sh scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	rm -rf $(BUILD)/demo-run
	$(BUILD)/trainprof run -o $(BUILD)/demo-run -- $(BUILD)/char_lm --steps 300
	$(BUILD)/trainprof export $(BUILD)/demo-run --format chrome -o $(BUILD)/demo-run/trace.json
	@echo "Open $(BUILD)/demo-run/trace.json in https://ui.perfetto.dev to see the timeline."

test: build
	cmake --build $(BUILD) -j $(JOBS) --target fuzzers
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

check-asan: deps
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DTPROF_SANITIZE=address -DTPROF_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS) -LE no-asan

check-tsan: deps
	cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=Debug -DTPROF_SANITIZE=thread -DTPROF_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && ctest --output-on-failure -j $(JOBS) -L tsan

check: test check-asan check-tsan
	@echo "make check: all test suites passed"

lint:
	python3 scripts/lint.py

bench: build
	@for b in $(BUILD)/bench/bench_*; do echo "== $$b"; $$b || exit 1; done

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan
