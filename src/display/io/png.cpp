// PNG through libpng: 8-bit RGBA rows, encoded into memory (encode_png, which callers may run on
// several images at once) and written through the atomic writer (write_png).
#include <cerrno>
#include <cstring>

#include "molaccel/display.hpp"

#if MOLACCEL_HAVE_PNG
#include <png.h>
#endif

namespace molaccel::display {

namespace {

void check_image(const Image& image, std::string_view what) {
  if (image.width < 1 || image.height < 1 ||
      image.rgba.size() != static_cast<std::size_t>(image.width) * image.height * 4)
    throw Error(fmt::format("{}: the image is {} x {} with {} bytes of pixels", what, image.width,
                            image.height, image.rgba.size()));
}

#if MOLACCEL_HAVE_PNG
// The encoder's output buffer, reserved before libpng starts so that its write callback never
// allocates (libpng reports errors by longjmp, which no C++ exception may cross).
struct Sink {
  std::vector<std::uint8_t>* bytes;
  bool full = false;
};

void append(png_structp png, png_bytep data, png_size_t length) {
  Sink& sink = *static_cast<Sink*>(png_get_io_ptr(png));
  if (sink.bytes->size() + length > sink.bytes->capacity()) {
    sink.full = true;
    png_error(png, "output buffer full");
  }
  sink.bytes->insert(sink.bytes->end(), data, data + length);
}

void no_flush(png_structp) {}
#endif

}  // namespace

std::vector<std::uint8_t> encode_png(const Image& image) {
  check_image(image, "PNG");
#if MOLACCEL_HAVE_PNG
  std::vector<std::uint8_t> bytes;
  // Stored (incompressible) rows need the raw bytes, a filter byte per row and zlib's 5 bytes per
  // 16 KB block; the headers and chunk framing fit in the 64 KB beyond.
  const std::size_t raw = image.rgba.size() + static_cast<std::size_t>(image.height);
  bytes.reserve(raw + raw / 16384 * 5 + 65536);
  Sink sink{&bytes};
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  if (!png || !info) {
    png_destroy_write_struct(&png, nullptr);
    throw Error("PNG: libpng could not start");
  }
  // Nothing with a destructor is created between here and the end (longjmp).
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    throw Error(sink.full ? "PNG: the encoded image outgrew its buffer" : "PNG: libpng failed");
  }
  png_set_write_fn(png, &sink, append, no_flush);
  png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
               PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int y = 0; y < image.height; ++y)
    png_write_row(png, image.rgba.data() + static_cast<std::size_t>(y) * image.width * 4);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return bytes;
#else
  MOLACCEL_THROW(NotCompiled, "PNG output (this build has no libpng)");
#endif
}

void write_png_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& png) {
  write_file_atomically(path, [&](std::FILE* f) {
    errno = 0;
    if (std::fwrite(png.data(), 1, png.size(), f) != png.size())
      throw InputError(path.string(), 0,
                       fmt::format("PNG write failed: {}", std::strerror(errno ? errno : EIO)));
  });
}

void write_png(const std::filesystem::path& path, const Image& image) {
  check_image(image, path.string());
  write_png_bytes(path, encode_png(image));
}

}  // namespace molaccel::display
