# Thin wrapper over CMake so the quick start is two commands: `make run` and `make test`.
BUILD ?= build
JOBS ?= 2
ARGS ?=

.PHONY: all build run test gpu-pack clean
all: build

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: $(BUILD)/build.ninja
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
