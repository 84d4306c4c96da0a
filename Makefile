# The C library: libzklock.so and libzklock.a (the core crate built with its `ffi` feature),
# include/zklock.h and a pkg-config file; and the `zklock` command (the cli crate).
#
#   make                                      # build (release) into target/release/
#   make install PREFIX=/usr/local            # build and install (the command into $(PREFIX)/bin);
#                                             # then: cc app.c $(pkg-config --cflags --libs zklock)
#                                             # static: cc app.c $(pkg-config --cflags --libs zklock-static)
#   make install PREFIX=/tmp/z PROFILE=debug  # debug build (what scripts/test-c and scripts/demo use)
#   make uninstall PREFIX=...
#   make header                               # regenerate include/zklock.h (scripts/gen-header)
#   make install PREFIX=... GLIBC=2.17        # linked against glibc 2.17 by zig (scripts/zig-glibc:
#                                             # cargo-zigbuild and zig on PATH; scripts/package does
#                                             # this), so the library and the command run on any
#                                             # glibc >= 2.17; built in target/glibc-2.17/
#
# The crate types are given to `cargo rustc` here rather than in core/Cargo.toml, so every other
# build of the core stays a plain rlib.

PREFIX ?= /usr/local
# Absolute: the .pc files name it when the layout under it is not the usual one.
override PREFIX := $(abspath $(PREFIX))
BINDIR ?= $(PREFIX)/bin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DATADIR ?= $(PREFIX)/share
PROFILE ?= release
CARGO ?= cargo
CARGO_TARGET_DIR ?= target
DESTDIR ?=

VERSION := $(shell $(CARGO) pkgid -p zookeeper-lock | sed 's/.*[#@]//')
MAJOR := $(word 1,$(subst ., ,$(VERSION)))
MINOR := $(word 2,$(subst ., ,$(VERSION)))
# Before 1.0 a minor version may break the ABI, so the soname carries it.
SOVERSION := $(if $(filter 0,$(MAJOR)),0.$(MINOR),$(MAJOR))
SONAME := libzklock.so.$(SOVERSION)

# GLIBC: empty, the host's toolchain and C library (the build machine's glibc is the floor);
# or a glibc version to link against, with zig as the linker: scripts/zig-glibc, which builds in
# $(CARGO_TARGET_DIR)/glibc-$(GLIBC), shared with the wheel and the npm addon of scripts/package.
GLIBC ?=
ifeq ($(GLIBC),)
  CARGO_BUILD := $(CARGO) build
  CARGO_RUSTC := $(CARGO) rustc
  BUILD_DIR := $(CARGO_TARGET_DIR)
else
  ZIG_GLIBC := CARGO_TARGET_DIR=$(CARGO_TARGET_DIR) $(dir $(abspath $(lastword $(MAKEFILE_LIST))))scripts/zig-glibc $(GLIBC)
  CARGO_BUILD := $(ZIG_GLIBC) $(CARGO) build
  CARGO_RUSTC := $(ZIG_GLIBC) $(CARGO) rustc
  BUILD_DIR := $(CARGO_TARGET_DIR)/glibc-$(GLIBC)
endif

ifeq ($(PROFILE),release)
  PROFILE_FLAG := --release
  OUT := $(BUILD_DIR)/release
else ifeq ($(PROFILE),debug)
  PROFILE_FLAG :=
  OUT := $(BUILD_DIR)/debug
else
  $(error PROFILE must be release or debug)
endif

# -z start-stop-visibility=hidden: the __start_/__stop_ symbols of a dependency's link sections
# would otherwise be exported; the .so exports zkl_* only. zig's linker driver refuses the flag:
# linked by zig (GLIBC=...), those symbols are exported, but protected (lld's default), so the
# library's own references stay bound to its own sections and no other object can interpose them.
RUSTFLAGS_LIB := -C link-arg=-Wl,-soname,$(SONAME)
ifeq ($(GLIBC),)
  RUSTFLAGS_LIB += -C link-arg=-Wl,-z,start-stop-visibility=hidden
endif
# What a static link needs besides libzklock.a, as rustc reports it (this for glibc if it does not).
DEFAULT_NATIVE_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

.PHONY: all lib cli install uninstall header
all: lib cli

# Always delegated to cargo, which knows whether anything changed.
lib:
	@echo "building libzklock ($(PROFILE)) with cargo; its output goes to $(OUT)/zklock-build.log"
	@mkdir -p $(OUT)
	$(CARGO_RUSTC) -p zookeeper-lock --lib --features ffi $(PROFILE_FLAG) --crate-type cdylib --crate-type staticlib \
	  -- $(RUSTFLAGS_LIB) --print native-static-libs 2>$(OUT)/zklock-build.log \
	  || { cat $(OUT)/zklock-build.log >&2; exit 1; }
	@sed -n 's/.*native-static-libs: //p' $(OUT)/zklock-build.log | tail -n 1 >$(OUT)/zklock-native-libs
	@test -s $(OUT)/zklock-native-libs || echo '$(DEFAULT_NATIVE_LIBS)' >$(OUT)/zklock-native-libs

# The `zklock` command, in the same profile as the library.
cli:
	$(CARGO_BUILD) -q -p zklock-cli --bin zklock $(PROFILE_FLAG)

# The .so is installed stripped; its debug info goes beside it in .debug/ (where gdb looks for
# the file its .gnu_debuglink names). The zklock command is installed stripped (25 MB -> a few). The system libraries of a static link lose -lgcc_s, which
# has no static form: the compiler driver links libgcc itself (libgcc_eh under -static).
# The .pc files are relocatable when the layout is the usual one under PREFIX: their paths are
# relative to the .pc file's own place (${pcfiledir}), so a copied or moved tree still builds
# against itself; with other directories given, absolute.
PC_RELOCATABLE := $(and $(filter $(PREFIX)/lib,$(LIBDIR)),$(filter $(PREFIX)/include,$(INCLUDEDIR)),$(filter $(PREFIX)/lib/pkgconfig,$(PKGCONFIGDIR)),$(filter $(PREFIX)/share,$(DATADIR)))
PC_PREFIX := $(if $(PC_RELOCATABLE),$${pcfiledir}/../..,$(PREFIX))
PC_LIBDIR := $(if $(PC_RELOCATABLE),$${prefix}/lib,$(LIBDIR))
PC_INCLUDEDIR := $(if $(PC_RELOCATABLE),$${prefix}/include,$(INCLUDEDIR))
PC_DATADIR := $(if $(PC_RELOCATABLE),$${prefix}/share,$(DATADIR))
PC_SUBST = sed -e 's|@PREFIX@|$(PC_PREFIX)|' -e 's|@LIBDIR@|$(PC_LIBDIR)|' -e 's|@INCLUDEDIR@|$(PC_INCLUDEDIR)|' -e 's|@DATADIR@|$(PC_DATADIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' -e "s|@LIBS_PRIVATE@|$$(sed 's/ *-lgcc_s//g' $(OUT)/zklock-native-libs)|"

# NO_BUILD=1 installs what `make lib cli` built, running no cargo: scripts/test's suites install
# beside `cargo test`, and a cargo build of the zklock command (whose dependencies' features differ
# from the workspace's) would put its own binary at target/debug/zklock, the path the command's
# tests run, unlinking it under them.
install: $(if $(NO_BUILD),,lib cli)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/.debug $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(DATADIR)/zklock
	install -m 644 include/zklock.h $(DESTDIR)$(INCLUDEDIR)/zklock.h
	objcopy --only-keep-debug $(OUT)/libzklock.so $(DESTDIR)$(LIBDIR)/.debug/libzklock.so.$(VERSION).debug
	chmod 644 $(DESTDIR)$(LIBDIR)/.debug/libzklock.so.$(VERSION).debug
	objcopy --strip-unneeded --add-gnu-debuglink=$(DESTDIR)$(LIBDIR)/.debug/libzklock.so.$(VERSION).debug \
	  $(OUT)/libzklock.so $(DESTDIR)$(LIBDIR)/libzklock.so.$(VERSION)
	chmod 755 $(DESTDIR)$(LIBDIR)/libzklock.so.$(VERSION)
	ln -sf libzklock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libzklock.so
	install -m 644 $(OUT)/libzklock.a $(DESTDIR)$(LIBDIR)/libzklock.a
	install -m 644 include/zklock.supp $(DESTDIR)$(DATADIR)/zklock/zklock.supp
	$(PC_SUBST) include/zklock.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/zklock.pc
	$(PC_SUBST) include/zklock-static.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/zklock-static.pc
	objcopy --strip-all $(OUT)/zklock $(DESTDIR)$(BINDIR)/zklock
	chmod 755 $(DESTDIR)$(BINDIR)/zklock

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/zklock $(DESTDIR)$(INCLUDEDIR)/zklock.h $(DESTDIR)$(LIBDIR)/libzklock.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/libzklock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/.debug/libzklock.so.$(VERSION).debug \
	  $(DESTDIR)$(LIBDIR)/libzklock.a $(DESTDIR)$(PKGCONFIGDIR)/zklock.pc $(DESTDIR)$(PKGCONFIGDIR)/zklock-static.pc \
	  $(DESTDIR)$(DATADIR)/zklock/zklock.supp

header:
	scripts/gen-header
