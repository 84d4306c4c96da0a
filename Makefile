# The C library: libzklock.so and libzklock.a (the core crate built with its `ffi` feature),
# include/zklock.h and a pkg-config file.
#
#   make                                      # build (release) into target/release/
#   make install PREFIX=/usr/local            # build and install; then: cc app.c $(pkg-config --cflags --libs zklock)
#   make install PREFIX=/tmp/z PROFILE=debug  # debug build (what scripts/test-c and scripts/demo use)
#   make uninstall PREFIX=...
#   make header                               # regenerate include/zklock.h (scripts/gen-header)
#
# The crate types are given to `cargo rustc` here rather than in core/Cargo.toml, so every other
# build of the core stays a plain rlib.

PREFIX ?= /usr/local
# Absolute, since it is written into zklock.pc.
override PREFIX := $(abspath $(PREFIX))
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
PROFILE ?= release
CARGO ?= cargo
CARGO_TARGET_DIR ?= target
DESTDIR ?=

VERSION := $(shell $(CARGO) pkgid -p zklock | sed 's/.*[#@]//')
MAJOR := $(word 1,$(subst ., ,$(VERSION)))
MINOR := $(word 2,$(subst ., ,$(VERSION)))
# Before 1.0 a minor version may break the ABI, so the soname carries it.
SOVERSION := $(if $(filter 0,$(MAJOR)),0.$(MINOR),$(MAJOR))
SONAME := libzklock.so.$(SOVERSION)

ifeq ($(PROFILE),release)
  PROFILE_FLAG := --release
  OUT := $(CARGO_TARGET_DIR)/release
else ifeq ($(PROFILE),debug)
  PROFILE_FLAG :=
  OUT := $(CARGO_TARGET_DIR)/debug
else
  $(error PROFILE must be release or debug)
endif

# -z start-stop-visibility=hidden: the __start_/__stop_ symbols of a dependency's link sections
# would otherwise be exported; the .so exports zkl_* only.
RUSTFLAGS_LIB := -C link-arg=-Wl,-soname,$(SONAME) -C link-arg=-Wl,-z,start-stop-visibility=hidden
# What a static link needs besides libzklock.a, as rustc reports it (this for glibc if it does not).
DEFAULT_NATIVE_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

.PHONY: all lib install uninstall header
all: lib

# Always delegated to cargo, which knows whether anything changed.
lib:
	@echo "building libzklock ($(PROFILE)) with cargo; its output goes to $(OUT)/zklock-build.log"
	@mkdir -p $(OUT)
	$(CARGO) rustc -p zklock --lib --features ffi $(PROFILE_FLAG) --crate-type cdylib --crate-type staticlib \
	  -- $(RUSTFLAGS_LIB) --print native-static-libs 2>$(OUT)/zklock-build.log \
	  || { cat $(OUT)/zklock-build.log >&2; exit 1; }
	@sed -n 's/.*native-static-libs: //p' $(OUT)/zklock-build.log | tail -n 1 >$(OUT)/zklock-native-libs
	@test -s $(OUT)/zklock-native-libs || echo '$(DEFAULT_NATIVE_LIBS)' >$(OUT)/zklock-native-libs

install: lib
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 include/zklock.h $(DESTDIR)$(INCLUDEDIR)/zklock.h
	install -m 755 $(OUT)/libzklock.so $(DESTDIR)$(LIBDIR)/libzklock.so.$(VERSION)
	ln -sf libzklock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libzklock.so
	install -m 644 $(OUT)/libzklock.a $(DESTDIR)$(LIBDIR)/libzklock.a
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	  -e 's|@VERSION@|$(VERSION)|' -e "s|@LIBS_PRIVATE@|$$(cat $(OUT)/zklock-native-libs)|" \
	  include/zklock.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/zklock.pc

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/zklock.h $(DESTDIR)$(LIBDIR)/libzklock.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/libzklock.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libzklock.a $(DESTDIR)$(PKGCONFIGDIR)/zklock.pc

header:
	scripts/gen-header
