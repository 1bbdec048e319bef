# Thin wrapper over CMake so the quick start is two commands: `make run` and `make test`.
BUILD ?= build
JOBS ?= 2
ARGS ?=
# Flags for tools/install-deps.sh, e.g. DEPS_FLAGS=--check (report missing packages, never install).
DEPS_FLAGS ?=

.PHONY: all build run test gpu-pack clean
all: build

# The Debian packages first (installed as root, else one message naming them all), then configure once, then build.
# One recipe, so nothing configures or compiles before the check has passed (also under make -j).
build:
	bash tools/install-deps.sh $(DEPS_FLAGS)
	[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD) -j $(JOBS)

# The main job: the fused MoE layer on the GPUs it finds, or the golden model across simulated ranks without one.
run: build
	./$(BUILD)/symmoe run $(ARGS)

# The CPU test suite (what CI runs): formats, golden model, planner/layouts, host-side checks, CLI.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Copy the GPU test binaries and the CLI into .dev/bin (git-ignored) to carry to the GPU machine.
gpu-pack: build
	bash tools/pack-device.sh $(BUILD) .dev/bin

clean:
	rm -rf $(BUILD)
