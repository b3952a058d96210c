#!/usr/bin/env bash
# MP4 output on the GPU machine, whose image has no FFmpeg libraries and which reaches no package
# registry. FFmpeg's libraries with what they need at run time are about 55 MB of Debian packages,
# more than one device call carries beside the repository, so they travel in two halves:
#   scripts/video-gpu.sh fetch          here: the packages into .deps/video-a and .deps/video-b
#                                       (the headers and pkg-config files go with video-a)
#   scripts/video-gpu.sh stage          there, once per half (carry .deps/video-a in one call and
#                                       .deps/video-b in the next, on the same warm machine): copies
#                                       the carried half to /tmp/molaccel-video
#   scripts/video-gpu.sh build [DIR]    there, after both halves: unpacks them, configures the build
#                                       folder DIR (default build/cuda) to find FFmpeg there, builds
#                                       the CLI and bench_orbital_display; prints the environment to
#                                       run them with (LD_LIBRARY_PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
stage=/tmp/molaccel-video
lib=usr/lib/x86_64-linux-gnu
case "${1:-}" in
  fetch)
    # The run-time closure of the four libraries as this Debian system resolves it, less what every
    # image with a C++ toolchain has.
    base="libc6 libgcc-s1 libstdc++6 zlib1g liblzma5 libbz2-1.0 libssl3 libselinux1 libpcre2-8-0 libcrypt1
          libzstd1 libpng16-16 libexpat1 libffi8 libuuid1 libblkid1
          libmount1 libudev1 libsystemd0 libcap2 liblz4-1 libsqlite3-0 libtinfo6 libdb5.3"
    pkgs=$(for l in libavcodec.so.59 libavformat.so.59 libavutil.so.57 libswscale.so.6 libswresample.so.4; do
             echo "/$lib/$l" && ldd "/$lib/$l" | awk '$3 ~ /^\// {print $3}'
           done | sort -u | while read -r f; do
             dpkg -S "$(readlink -f "$f")" 2>/dev/null || dpkg -S "$f"
           done | cut -d: -f1 | sort -u | grep -vxF -f <(tr -s ' \n' '\n' <<<"$base"))
    rm -rf .deps/video-a .deps/video-b .deps/video-all
    mkdir -p .deps/video-all .deps/video-a/debs .deps/video-b/debs
    # shellcheck disable=SC2086
    (cd .deps/video-all && apt-get download $pkgs >/dev/null)
    # Largest first, each to the lighter half.
    a=0 b=0
    while read -r size deb; do
      if [ "$a" -le "$b" ]; then mv "$deb" .deps/video-a/debs/; a=$((a + size)); else mv "$deb" .deps/video-b/debs/; b=$((b + size)); fi
    done < <(find .deps/video-all -name '*.deb' -printf '%s %p\n' | sort -rn)
    rmdir .deps/video-all
    # Headers and pkg-config files of this system's FFmpeg (the same version as the packages).
    mkdir -p ".deps/video-a/dev/usr/include/x86_64-linux-gnu" ".deps/video-a/dev/$lib/pkgconfig"
    for m in libavcodec libavformat libavutil libswscale libswresample; do
      cp -r "/usr/include/x86_64-linux-gnu/$m" .deps/video-a/dev/usr/include/x86_64-linux-gnu/
      cp "/$lib/pkgconfig/$m.pc" ".deps/video-a/dev/$lib/pkgconfig/"
    done
    du -sh .deps/video-a .deps/video-b
    ;;
  stage)
    mkdir -p "$stage"
    for half in .deps/video-a .deps/video-b; do [ -d "$half" ] && cp -r "$half" "$stage/"; done
    ls "$stage"
    ;;
  build)
    build=${2:-build/cuda}
    [ -d "$stage/video-a" ] && [ -d "$stage/video-b" ] || { echo "stage both halves first" >&2; exit 1; }
    root=$stage/root
    mkdir -p "$root"
    for deb in "$stage"/video-*/debs/*.deb; do dpkg -x "$deb" "$root"; done
    cp -r "$stage/video-a/dev/." "$root/"
    for m in avcodec avformat avutil swscale swresample; do  # the -dev packages' links
      (cd "$root/$lib" && ln -sf "$(ls lib$m.so.* | head -1)" "lib$m.so")
    done
    libs="$root/$lib:$root/lib/x86_64-linux-gnu"
    export PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_PATH=$root/$lib/pkgconfig PATH="/usr/local/cuda/bin:$PATH"
    cmake -S . -B "$build" -U "pkgcfg_lib_MOLACCEL_FFMPEG*" -U "MOLACCEL_FFMPEG*" -DMOLACCEL_VIDEO=ON -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,${libs//:/ -Wl,-rpath-link,}" \
      -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,${libs//:/ -Wl,-rpath-link,}" | grep -E "MP4|error" || true
    cmake --build "$build" -j"$(nproc)" --target molaccel_cli bench_orbital_display >"$stage/build.log" 2>&1 ||
      { grep -E "error|undefined" "$stage/build.log" | head -20; exit 1; }
    echo "export LD_LIBRARY_PATH=$libs"
    ;;
  *) sed -n '2,15p' "$0" >&2; exit 2 ;;
esac
