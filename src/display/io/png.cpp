// PNG through libpng: 8-bit RGBA rows, written into the atomic writer's temporary file.
#include <cerrno>
#include <cstring>

#include "molaccel/display.hpp"

#if MOLACCEL_HAVE_PNG
#include <png.h>
#endif

namespace molaccel::display {

void write_png(const std::filesystem::path& path, const Image& image) {
  if (image.width < 1 || image.height < 1 ||
      image.rgba.size() != static_cast<std::size_t>(image.width) * image.height * 4)
    throw Error(fmt::format("{}: the image is {} x {} with {} bytes of pixels", path.string(), image.width,
                            image.height, image.rgba.size()));
#if MOLACCEL_HAVE_PNG
  write_file_atomically(path, [&](std::FILE* f) {
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png ? png_create_info_struct(png) : nullptr;
    if (!png || !info) {
      png_destroy_write_struct(&png, nullptr);
      throw Error(fmt::format("{}: libpng could not start", path.string()));
    }
    // libpng reports errors by longjmp: nothing with a destructor lives between here and the end.
    // The only errors once started are libpng's fwrite failing (errno says why).
    errno = 0;
    if (setjmp(png_jmpbuf(png))) {
      const int err = errno ? errno : EIO;
      png_destroy_write_struct(&png, &info);
      throw InputError(path.string(), 0, fmt::format("PNG write failed: {}", std::strerror(err)));
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, static_cast<png_uint_32>(image.width), static_cast<png_uint_32>(image.height), 8,
                 PNG_COLOR_TYPE_RGBA, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < image.height; ++y)
      png_write_row(png, image.rgba.data() + static_cast<std::size_t>(y) * image.width * 4);
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
  });
#else
  MOLACCEL_THROW(NotCompiled, "PNG output (this build has no libpng)");
#endif
}

}  // namespace molaccel::display
