# attnd build.  `make` builds everything; `make test` runs the unit and
# integration suites; `make test-asan` runs the unit suite under ASan+UBSan;
# `make fuzz FUZZ_SECONDS=N` runs the libFuzzer target (docs/fuzz.md);
# `make demo` is the main job (README).  BUILD=dir builds out of tree, so
# several builds (asan, static, per-developer) can coexist.

# `make` with no target builds attnd, attnctl and libattn: stamp and include
# rules below would otherwise be the first target make meets.
.DEFAULT_GOAL := all

BUILD   ?= build
CC      ?= cc
PREFIX  ?= /usr/local
# Where `make install` puts the rest (DESTDIR=dir stages it all under dir).
# systemd reads units, sysusers.d and tmpfiles.d from $(PREFIX)/lib too.
BINDIR      ?= $(PREFIX)/bin
SYSCONFDIR  ?= /etc
DOCDIR      ?= $(PREFIX)/share/doc/attnd
UNITDIR     ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SAN     ?= 0
STATIC  ?= 0
NVCC    ?= $(shell command -v nvcc 2>/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
CUDA    ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

# The build id names the source revision (seed 0x0BA: a version string is not
# a loaded-artifact identity, so replies carry the commit and the flags).
ATTN_BUILD_ID ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
# The version has one home, the VERSION file: it feeds the daemon's hello,
# libattn's SONAME (its major number) and libattn.pc.
ATTN_VERSION := $(shell cat VERSION)
ATTN_SOVERSION := $(firstword $(subst ., ,$(ATTN_VERSION)))
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS  ?= -O2 -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -I. -MMD -MP
# Every object hides its symbols; attn/client.h marks the public ones
# (ATTN_EXPORT), so libattn.so exports the client API and nothing else.
CFLAGS  += -fvisibility=hidden -DATTN_VERSION='"$(ATTN_VERSION)"'
CFLAGS  += -DATTN_BUILD_ID='"$(ATTN_BUILD_ID)"' -DATTN_BUILD_FLAGS='"CC=$(CC) CUDA=$(CUDA) SAN=$(SAN) STATIC=$(STATIC)"'
# nng older than the fix for its issue 1518 (Debian 12's 1.5.2) is replaced by
# the private static build that scripts/deps.sh makes outside the clone
# (libattn.so keeps its symbols to itself: --exclude-libs below).
NNG_PREFIX := $(shell ./scripts/deps.sh --nng-prefix)
comma := ,
ifneq ($(NNG_PREFIX),)
CFLAGS  += -I$(NNG_PREFIX)/include
NNG_LIBS := $(NNG_PREFIX)/lib/libnng.a -lmbedtls -lmbedx509 -lmbedcrypto
else
NNG_LIBS := -lnng
endif
LDLIBS  := $(NNG_LIBS) -luv -lmsgpackc -ljansson -lcrypto -lpthread -lm -ldl -lrt
ifeq ($(STATIC),1)
LDLIBS  := -Wl,-Bstatic $(NNG_LIBS) -lmbedtls -lmbedx509 -lmbedcrypto -luv_a -lmsgpackc -ljansson -lcrypto -Wl,-Bdynamic -lpthread -lm -ldl -lrt -latomic
endif
ifeq ($(SAN),1)
CFLAGS  := $(filter-out -O2,$(CFLAGS)) -O1 -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
endif
# FUZZ=1 (with CC=clang SAN=1, set by `make fuzz`): coverage instrumentation
# for libFuzzer in every object; only the fuzz target links the fuzzer's main.
FUZZ    ?= 0
# The CPU engine's inner loops get no comparison tracing (they branch on
# data, not on the request's structure, and would halve the executions).
ifeq ($(FUZZ),1)
CFLAGS  := $(filter-out -O1,$(CFLAGS)) -O2 -fsanitize=fuzzer-no-link \
	-fsanitize-coverage-ignorelist=tests/fuzz/coverage-ignore.txt
endif

# sm_90a machine code for the H200 plus compute_90 PTX for portability.
NVCCFLAGS ?= -O3 -std=c++17 -lineinfo \
	-gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90 \
	-Xcompiler -fPIC -Iinclude -I. -MMD -MP
ifeq ($(CUDA),1)
CFLAGS  += -DATTN_WITH_CUDA=1 -I$(CUDA_HOME)/include
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -lstdc++
endif

CORE_SRCS   := $(wildcard kernels/common/*.c planner/*.c protocol/*.c kernels/cpu/*.c engines/cpu/*.c)
CUDA_SRCS   := $(wildcard kernels/cuda/*.cu)
CUDA_CSRCS  := $(wildcard kernels/cuda/*.c engines/cuda/*.c)
DAEMON_SRCS := $(filter-out daemon/main.c,$(wildcard daemon/*.c))
CLIENT_SRCS := $(wildcard client/lib/*.c)
CTL_SRCS    := $(wildcard client/attnctl/*.c)
UNIT_SRCS   := $(wildcard tests/unit/test_*.c)
SRVT_SRCS   := $(wildcard tests/daemon/test_*.c)
INTEG_SRCS  := $(wildcard tests/integration/test_*.c)
PY_TESTS    := $(wildcard client/python/test_*.py) $(wildcard tests/lint/test_*.py)
SH_TESTS    := $(wildcard tests/integration/test_*.sh)
TESTLIB_SRCS:= $(wildcard tests/lib/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
CORE_OBJS   := $(call obj,$(CORE_SRCS))
DAEMON_OBJS := $(call obj,$(DAEMON_SRCS))
CLIENT_OBJS := $(call obj,$(CLIENT_SRCS))
CTL_OBJS    := $(call obj,$(CTL_SRCS))
TESTLIB_OBJS:= $(call obj,$(TESTLIB_SRCS))
UNIT_BINS   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
SRVT_BINS   := $(patsubst tests/daemon/%.c,$(BUILD)/tests/%,$(SRVT_SRCS))
INTEG_BINS  := $(patsubst tests/integration/%.c,$(BUILD)/tests/%,$(INTEG_SRCS))

# A stamp file is rewritten only when its line changes, so a rule that
# depends on it reruns exactly when that configuration changed.
write_stamp = $(shell mkdir -p $(BUILD) && (echo '$(2)' | cmp -s - $(1) || echo '$(2)' > $(1)))

# Every object depends on the build configuration: CUDA=0/1 (ATTN_WITH_CUDA
# and which objects exist), SAN, STATIC, the compilers and their flags (an
# object left over from other flags, e.g. without -fvisibility=hidden, would
# also silently change what libattn.so exports).  The build id is left out
# here, so a new commit does not rebuild everything.
FLAGS_STAMP := $(BUILD)/flags.stamp
FLAGS_LINE  := CC=$(CC) CUDA=$(CUDA) SAN=$(SAN) STATIC=$(STATIC) NVCC=$(NVCC) \
	CFLAGS=$(filter-out -DATTN_BUILD_ID=%,$(CFLAGS)) NVCCFLAGS=$(NVCCFLAGS) \
	LDFLAGS=$(LDFLAGS) LDLIBS=$(LDLIBS) CUDA_LIBS=$(CUDA_LIBS)
$(call write_stamp,$(FLAGS_STAMP),$(subst ',,$(FLAGS_LINE)))

# Objects that embed the build id are rebuilt whenever it changes (a stale id
# would name another revision than the one that runs).
BUILD_ID_STAMP := $(BUILD)/build_id.stamp
BUILD_ID_LINE  := $(ATTN_BUILD_ID) $(ATTN_VERSION) CC=$(CC) CUDA=$(CUDA) SAN=$(SAN) STATIC=$(STATIC)
$(call write_stamp,$(BUILD_ID_STAMP),$(BUILD_ID_LINE))
$(BUILD)/obj/daemon/artifact.o $(BUILD)/obj/daemon/server.o: $(BUILD_ID_STAMP)
$(BUILD)/obj/client/attnctl/version.o: $(BUILD_ID_STAMP)

ifeq ($(CUDA),1)
CUDA_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CUDA_SRCS)) $(call obj,$(CUDA_CSRCS))
else
CUDA_OBJS := $(call obj,$(CUDA_CSRCS))
endif

LIBCORE   := $(BUILD)/libattn_core.a
LIBCUDA   := $(BUILD)/libattn_cuda.a
LIBSRV    := $(BUILD)/libattn_server.a
LIBCLIENT := $(BUILD)/libattn.a
LIBCLIENT_SO := $(BUILD)/libattn.so
LIBCLIENT_SO_REAL := $(BUILD)/libattn.so.$(ATTN_VERSION)
LIBCLIENT_SONAME  := libattn.so.$(ATTN_SOVERSION)
ATTND     := $(BUILD)/attnd
ATTNCTL   := $(BUILD)/attnctl
ENGINE_LIBS := $(LIBCUDA) $(LIBCORE)

.PHONY: all deps test unit unit-core integration test-asan lint demo bench-cpu install clean gpu-check verify-systemd fuzz fuzz-run
# STATIC=1 (self-contained binaries for machines without the -dev packages)
# links nng, libuv, msgpack-c, jansson and libcrypto statically; no .so then.
all: deps $(ATTND) $(ATTNCTL) $(LIBCLIENT) $(if $(filter 1,$(STATIC)),,$(LIBCLIENT_SO)) \
	$(if $(filter 1,$(CUDA)),$(BUILD)/examples/zero_copy)

deps:
	@./scripts/deps.sh

$(BUILD)/obj/%.o: %.c $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(FLAGS_STAMP) | deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIBCORE): $(CORE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBCUDA): $(CUDA_OBJS) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(CUDA_OBJS)

$(LIBSRV): $(DAEMON_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBCLIENT): $(CLIENT_OBJS) $(CORE_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

# libattn.so.X.Y.Z with SONAME libattn.so.X and the usual two links: the
# client and protocol objects (the API lives in both), and from the core
# archive only the members they need (names, errors, validators).
PROTOCOL_OBJS := $(call obj,$(wildcard protocol/*.c))
$(LIBCLIENT_SO_REAL): $(CLIENT_OBJS) $(PROTOCOL_OBJS) $(LIBCORE)
	$(CC) -shared $(LDFLAGS) -Wl,-soname,$(LIBCLIENT_SONAME) -Wl,--no-undefined -o $@ \
		$(if $(NNG_PREFIX),-Wl$(comma)--exclude-libs$(comma)libnng.a) \
		$(CLIENT_OBJS) $(PROTOCOL_OBJS) $(LIBCORE) $(LDLIBS)

$(LIBCLIENT_SO): $(LIBCLIENT_SO_REAL)
	ln -sf $(notdir $(LIBCLIENT_SO_REAL)) $(BUILD)/$(LIBCLIENT_SONAME)
	ln -sf $(notdir $(LIBCLIENT_SO_REAL)) $@

$(ATTND): $(BUILD)/obj/daemon/main.o $(LIBSRV) $(ENGINE_LIBS)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBSRV) $(ENGINE_LIBS) $(CUDA_LIBS) $(LDLIBS)

# attnctl is a client: libattn and protocol only (--local starts an attnd).
$(ATTNCTL): $(CTL_OBJS) $(LIBCLIENT)
	$(CC) $(LDFLAGS) -o $@ $(CTL_OBJS) $(LIBCLIENT) $(LDLIBS)

# examples/zero_copy.c: libattn and the CUDA runtime (CUDA=1 builds only).
$(BUILD)/examples/zero_copy: examples/zero_copy.c $(LIBCLIENT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBCLIENT) $(CUDA_LIBS) $(LDLIBS)

# examples/cuda/graph_handshake.cu: the graph-safe handshake (its kernel needs
# nvcc; built on demand, e.g. by scripts/stage-zexp.sh, not by `all`).
$(BUILD)/examples/graph_handshake: examples/cuda/graph_handshake.cu $(LIBCLIENT)
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -std=c++17 -Iinclude -I. -gencode=arch=compute_90a,code=sm_90a \
		-gencode=arch=compute_90,code=compute_90 -c $< -o $@.o
	$(CC) $(LDFLAGS) -o $@ $@.o $(LIBCLIENT) $(CUDA_LIBS) $(LDLIBS)

# tests/unit: pure modules (core library only); tests/daemon: server and
# client modules in-process; tests/integration: a daemon subprocess.
$(BUILD)/tests/%: tests/unit/%.c $(TESTLIB_OBJS) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TESTLIB_OBJS) $(LIBCORE) -lcmocka $(LDLIBS)

$(BUILD)/tests/%: tests/daemon/%.c $(TESTLIB_OBJS) $(LIBCLIENT) $(LIBSRV) $(ENGINE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TESTLIB_OBJS) $(LIBCLIENT) $(LIBSRV) $(ENGINE_LIBS) $(CUDA_LIBS) -lcmocka $(LDLIBS)

$(BUILD)/tests/%: tests/integration/%.c $(TESTLIB_OBJS) $(LIBCLIENT) $(LIBSRV) $(ENGINE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TESTLIB_OBJS) $(LIBCLIENT) $(LIBSRV) $(ENGINE_LIBS) $(CUDA_LIBS) -lcmocka $(LDLIBS)

# tests/gpu: compiled (never run) by the CUDA build, so a change that breaks
# a GPU test fails `make test` here, not first on the device
# (scripts/device-check.sh runs them there, built by tests/gpu/build.sh).
GPU_TEST_BINS := $(if $(filter 1,$(CUDA)),$(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(wildcard tests/gpu/test_*.c)))
$(BUILD)/tests/gpu/%: tests/gpu/%.c $(BUILD)/obj/tests/lib/random_batch.o $(LIBCUDA) $(LIBCORE)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/obj/tests/lib/random_batch.o $(LIBCUDA) $(LIBCORE) $(CUDA_LIBS) -lcmocka $(LDLIBS)

unit: deps $(UNIT_BINS) $(SRVT_BINS)
	ATTN_SRCDIR=$(CURDIR) ./scripts/run-tests.sh $(UNIT_BINS) $(SRVT_BINS)

# Only the pure modules (what most developers iterate on).
unit-core: deps $(UNIT_BINS)
	ATTN_SRCDIR=$(CURDIR) ./scripts/run-tests.sh $(UNIT_BINS)

# tests/lint/test_exports.py reads the shared library ("none" when STATIC=1).
TEST_LIBATTN := $(if $(filter 1,$(STATIC)),none,$(abspath $(LIBCLIENT_SO)))
TEST_ENV = ATTN_SRCDIR=$(CURDIR) ATTND=$(abspath $(ATTND)) ATTNCTL=$(abspath $(ATTNCTL)) \
	ATTN_LIBATTN=$(TEST_LIBATTN)

integration: deps $(ATTND) $(ATTNCTL) $(INTEG_BINS) $(if $(filter 1,$(STATIC)),,$(LIBCLIENT_SO))
	$(TEST_ENV) ./scripts/run-tests.sh $(INTEG_BINS) $(PY_TESTS) $(SH_TESTS)

# The README's test command: every suite, one summary line at the end.
test: deps $(UNIT_BINS) $(SRVT_BINS) $(ATTND) $(ATTNCTL) $(INTEG_BINS) $(GPU_TEST_BINS) $(if $(filter 1,$(STATIC)),,$(LIBCLIENT_SO))
	$(TEST_ENV) ./scripts/run-tests.sh $(UNIT_BINS) $(SRVT_BINS) $(INTEG_BINS) $(PY_TESTS) $(SH_TESTS)

# Unit suite under AddressSanitizer and UndefinedBehaviorSanitizer (CUDA off:
# the sanitizers do not instrument nvcc's objects and no GPU runs here).
test-asan: deps
	$(MAKE) BUILD=build-asan SAN=1 CUDA=0 unit

# Coverage-guided fuzzing (docs/fuzz.md): the frame decoder, the JSON form,
# the manifest validator and the request handler under libFuzzer with ASan
# and UBSan, seeded from examples/.  FUZZ_SECONDS bounds the run; new inputs
# accumulate in $(FUZZ_BUILD)/fuzz/corpus, a crash lands in $(FUZZ_BUILD)/fuzz/.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_ARGS    ?=
FUZZ_INPUTS  := $(wildcard examples/*.capture examples/*.json)
FUZZ_TARGET  := $(BUILD)/fuzz/fuzz_request
FUZZ_SEEDGEN := $(BUILD)/fuzz/fuzz_seeds

fuzz:
	@./scripts/deps.sh fuzz
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang SAN=1 CUDA=0 FUZZ=1 fuzz-run

fuzz-run: $(FUZZ_TARGET) $(FUZZ_SEEDGEN)
	rm -rf $(BUILD)/fuzz/seeds && mkdir -p $(BUILD)/fuzz/seeds $(BUILD)/fuzz/corpus
	$(FUZZ_SEEDGEN) $(BUILD)/fuzz/seeds $(FUZZ_INPUTS)
	$(FUZZ_TARGET) -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
		-max_len=16384 -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz/ $(FUZZ_ARGS) \
		$(BUILD)/fuzz/corpus $(BUILD)/fuzz/seeds

$(FUZZ_TARGET): tests/fuzz/fuzz_request.c $(LIBSRV) $(ENGINE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $(LDFLAGS) -o $@ $< $(LIBSRV) $(ENGINE_LIBS) $(LDLIBS)

$(FUZZ_SEEDGEN): tests/fuzz/fuzz_seeds.c $(LIBSRV) $(ENGINE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIBSRV) $(ENGINE_LIBS) $(LDLIBS)

# clang-format checks every tracked or new (untracked, not ignored) source
# file; cppcheck the C modules; check-includes.py the arrows between the
# folders (ARCHITECTURE.md, exceptions in scripts/include-exceptions.txt).
LINT_SRCS := '*.c' '*.h' '*.cu' '*.cuh'
lint: deps
	python3 scripts/check-includes.py
	@files=$$(git ls-files --cached --others --exclude-standard -- $(LINT_SRCS)); \
	clang-format --dry-run --Werror $$files && echo "clang-format: clean"
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --std=c11 \
		--suppress=missingIncludeSystem --inline-suppr -Iinclude -I. \
		kernels/common planner protocol kernels/cpu engines daemon client && echo "cppcheck: clean"

# The main job (README): serve the shipped captured workload and verify it.
demo: all
	./scripts/demo.sh $(BUILD)

# The unit with this install's paths (systemd/attnd.service.in).
UNIT := $(BUILD)/attnd.service
.PHONY: $(UNIT) # cheap, and its paths are make variables: always rewritten
$(UNIT): systemd/attnd.service.in
	@mkdir -p $(dir $@)
	sed -e 's|@BINDIR@|$(BINDIR)|g' -e 's|@SYSCONFDIR@|$(SYSCONFDIR)|g' \
		-e 's|@DOCDIR@|$(DOCDIR)|g' $< > $@

# Binaries, libattn, headers, pkg-config; the systemd unit, its sysusers.d
# and tmpfiles.d entries; the default configuration (an existing one is
# kept); README, LICENSE and docs.  Then, on a systemd host:
#   systemd-sysusers && systemd-tmpfiles --create && systemctl daemon-reload
install: all $(UNIT)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/attn
	install -m 755 $(ATTND) $(ATTNCTL) $(DESTDIR)$(BINDIR)/
	install -m 644 $(LIBCLIENT) $(DESTDIR)$(PREFIX)/lib/
	$(if $(filter 1,$(STATIC)),,install -m 755 $(LIBCLIENT_SO_REAL) $(DESTDIR)$(PREFIX)/lib/ && \
		ln -sf $(notdir $(LIBCLIENT_SO_REAL)) $(DESTDIR)$(PREFIX)/lib/$(LIBCLIENT_SONAME) && \
		ln -sf $(notdir $(LIBCLIENT_SO_REAL)) $(DESTDIR)$(PREFIX)/lib/libattn.so)
	install -m 644 include/attn/*.h $(DESTDIR)$(PREFIX)/include/attn/
	sed 's|@PREFIX@|$(PREFIX)|; s|@VERSION@|$(ATTN_VERSION)|' client/libattn.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/libattn.pc
	install -d $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(TMPFILESDIR)
	install -m 644 $(UNIT) $(DESTDIR)$(UNITDIR)/attnd.service
	install -m 644 systemd/attnd.sysusers $(DESTDIR)$(SYSUSERSDIR)/attnd.conf
	install -m 644 systemd/attnd.tmpfiles $(DESTDIR)$(TMPFILESDIR)/attnd.conf
	install -d $(DESTDIR)$(SYSCONFDIR)/attnd
	[ -e $(DESTDIR)$(SYSCONFDIR)/attnd/attnd.json ] || \
		install -m 644 config/attnd.json $(DESTDIR)$(SYSCONFDIR)/attnd/attnd.json
	install -d $(DESTDIR)$(DOCDIR)
	install -m 644 README.md LICENSE docs/*.md $(DESTDIR)$(DOCDIR)/

# systemd-analyze verify of the unit as `make install` writes it, in a staged
# root (scripts/verify-systemd.sh; installs systemd from Debian if missing).
verify-systemd: all
	@root=$$(mktemp -d) && $(MAKE) --no-print-directory install DESTDIR=$$root >/dev/null && \
	PREFIX=$(PREFIX) SYSCONFDIR=$(SYSCONFDIR) ./scripts/verify-systemd.sh $$root; \
	rc=$$?; rm -rf $$root; exit $$rc

clean:
	rm -rf build build-*

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
