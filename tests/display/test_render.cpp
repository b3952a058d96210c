// The CPU renderer, checked by content: a p-like lobe pair (+x lobe blue, -x lobe red) lands on
// the right and the left of the image in the default view and swaps sides when turned 180 degrees
// about y; the background fills the rest; zoom magnifies. The PNG is decoded by an independent
// reader (check_png.py, Python standard library).
#include <cstdlib>

#include "display_test_util.hpp"

namespace molaccel::display {
namespace {

Scene lobe_pair() {
  return test::lobe_pair_scene();
}

enum class Kind { background, blue, red, other };
Kind classify(const Image& im, int x, int y) {
  const std::uint8_t* p = &im.rgba[4 * (static_cast<std::size_t>(y) * im.width + x)];
  if (p[0] == 255 && p[1] == 255 && p[2] == 255) return Kind::background;
  if (p[2] > p[0] + 40 && p[2] > p[1] + 20) return Kind::blue;
  if (p[0] > p[2] + 40 && p[0] > p[1] + 40) return Kind::red;
  return Kind::other;
}

// Counts of each kind in the left and right halves.
struct Halves {
  int blue[2] = {0, 0}, red[2] = {0, 0}, background = 0;
};
Halves count(const Image& im) {
  Halves h;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x) {
      const int side = x < im.width / 2 ? 0 : 1;
      switch (classify(im, x, y)) {
        case Kind::blue:
          ++h.blue[side];
          break;
        case Kind::red:
          ++h.red[side];
          break;
        case Kind::background:
          ++h.background;
          break;
        default:
          break;
      }
    }
  return h;
}

TEST(DisplayRender, LobesWhereTheyProjectBackgroundElsewhere) {
  const Scene scene = lobe_pair();
  RenderOptions options;
  options.width = 160;
  options.height = 120;
  const Image im = render_scene(scene, options);
  ASSERT_EQ(im.width, 160);
  ASSERT_EQ(im.height, 120);
  ASSERT_EQ(im.rgba.size(), 160u * 120u * 4u);
  const Halves h = count(im);
  const int n = 160 * 120;
  EXPECT_GT(h.blue[1], n / 20);  // the +x lobe on the right
  EXPECT_GT(h.red[0], n / 20);   // the -x lobe on the left
  EXPECT_LT(h.blue[0], n / 200);
  EXPECT_LT(h.red[1], n / 200);
  EXPECT_GT(h.background, n / 4);
  for (auto [x, y] : {std::pair{0, 0}, {159, 0}, {0, 119}, {159, 119}, {80, 5}})
    EXPECT_EQ(classify(im, x, y), Kind::background) << x << "," << y;
  EXPECT_EQ(classify(im, 120, 60), Kind::blue);  // a lobe's centre, lit
  EXPECT_EQ(classify(im, 40, 60), Kind::red);

  options.view = parse_view("ry=180");
  const Halves turned = count(render_scene(scene, options));
  EXPECT_GT(turned.blue[0], n / 20);
  EXPECT_GT(turned.red[1], n / 20);

  options.view = parse_view("zoom=2");
  EXPECT_LT(count(render_scene(scene, options)).background, h.background / 2);
}

TEST(DisplayRender, OptionsAndBadInput) {
  const View v = parse_view("rx=30,ry=-45.5,zoom=1.5");
  EXPECT_EQ(v.rotate_x, 30);
  EXPECT_EQ(v.rotate_y, -45.5);
  EXPECT_EQ(v.zoom, 1.5);
  EXPECT_THROW(parse_view("rx=abc"), InputError);
  EXPECT_THROW(parse_view("zoom=0"), InputError);
  EXPECT_THROW(parse_view("tilt=3"), InputError);
  EXPECT_EQ(parse_image_size("1920x1080"), (std::array<int, 2>{1920, 1080}));
  EXPECT_THROW(parse_image_size("1920"), InputError);
  EXPECT_THROW(parse_image_size("0x10"), InputError);
  EXPECT_THROW(parse_image_size("20000x10"), InputError);
  EXPECT_THROW(render_scene(Scene{}, RenderOptions{}), InputError);
}

// The backend choice: names, the CPU resources' automatic choice (the same picture as without
// resources, any thread count), and the GPU asked of resources without one.
TEST(DisplayRender, BackendChoice) {
  EXPECT_EQ(parse_render_backend("auto"), RenderBackend::automatic);
  EXPECT_EQ(parse_render_backend("cpu"), RenderBackend::cpu);
  EXPECT_EQ(parse_render_backend("cuda"), RenderBackend::cuda);
  EXPECT_EQ(parse_render_backend("gpu"), RenderBackend::cuda);
  EXPECT_EQ(to_string(RenderBackend::cuda), "cuda");
  EXPECT_THROW(parse_render_backend("opengl"), InputError);
  const Scene scene = lobe_pair();
  RenderOptions options;
  options.width = 90;
  options.height = 70;
  options.threads = 1;
  const Image one_thread = render_scene(scene, options);
  RenderInfo info;
  EXPECT_EQ(render_scene(Resources::cpu(2), scene, options, &info).rgba, one_thread.rgba);
  EXPECT_EQ(info.backend, "cpu");
  options.backend = RenderBackend::cuda;
  EXPECT_THROW(render_scene(Resources::cpu(2), scene, options), DeviceUnavailable);
  EXPECT_THROW(render_scene(Resources::cpu(2), Scene{}, options), InputError);
}

TEST(DisplayRender, PngDecodesWithAnIndependentReader) {
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  RenderOptions options;
  options.width = 96;
  options.height = 64;
  try {
    write_png(dir / "lobes.png", render_scene(lobe_pair(), options));
  } catch (const NotCompiled&) {
    GTEST_SKIP() << "this build has no libpng";
  }
  const std::string command = std::string(MOLACCEL_PYTHON) + " '" + MOLACCEL_PNG_CHECKER + "' '" +
                              (dir / "lobes.png").string() + "' 96 64 > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

// `count` pictures of the lobe pair turning about y, `step` degrees apart.
std::vector<Image> turning_lobes(int count, int width, int height, double step) {
  RenderOptions options;
  options.width = width;
  options.height = height;
  std::vector<Image> images;
  for (int f = 0; f < count; ++f) {
    options.view.rotate_y = step * f;
    images.push_back(render_scene(lobe_pair(), options));
  }
  return images;
}

// write_png is encode_png's bytes written; encoding several images at once (as the orbital render
// and animate commands do, one batch on every core) gives each one's bytes as alone; a noisy image
// (far less compressible than a rendering) still fits the encoder's reserved buffer.
TEST(DisplayRender, PngEncodedInMemoryAndOnThreads) {
  std::vector<Image> images = turning_lobes(6, 120, 80, 25.0);
  Image noise = images[0];
  std::uint32_t state = 12345;
  for (std::uint8_t& byte : noise.rgba) {
    state = state * 1664525u + 1013904223u;
    byte = static_cast<std::uint8_t>(state >> 24);
  }
  images.push_back(noise);
  std::vector<std::vector<std::uint8_t>> alone;
  try {
    for (const Image& image : images) alone.push_back(encode_png(image));
  } catch (const NotCompiled&) {
    GTEST_SKIP() << "this build has no libpng";
  }
  EXPECT_GT(alone.back().size(), noise.rgba.size());  // stored, not compressed
  molaccel::testing::TempDir dir;
  write_png(dir / "a.png", images[0]);
  EXPECT_EQ(molaccel::testing::read_file(dir / "a.png"), std::string(alone[0].begin(), alone[0].end()));
  std::vector<std::vector<std::uint8_t>> together(images.size());
  parallel_for(images.size(), 4, 1, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) together[i] = encode_png(images[i]);
  });
  EXPECT_EQ(together, alone);
  EXPECT_THROW(encode_png(Image{}), Error);
}

// An MP4 of three turning frames read by an independent box parser (check_mp4.py); an odd size
// loses its last column and row; nothing is written before finish().
TEST(DisplayVideo, Mp4PassesABoxReader) {
  if (!video_available()) GTEST_SKIP() << "this build has no FFmpeg libraries";
  if (std::string(MOLACCEL_PYTHON).empty()) GTEST_SKIP() << "no Python 3 interpreter found at configure time";
  molaccel::testing::TempDir dir;
  const Scene scene = lobe_pair();
  RenderOptions options;
  options.width = 97;
  options.height = 64;
  {
    VideoWriter writer(dir / "turn.mp4", 97, 64, 5);
    for (int f = 0; f < 3; ++f) {
      options.view.rotate_y = 30.0 * f;
      writer.add_frame(render_scene(scene, options));
    }
    EXPECT_FALSE(std::filesystem::exists(dir / "turn.mp4"));
    writer.finish();
    EXPECT_EQ(writer.frames(), 3u);
  }
  const std::string command = std::string(MOLACCEL_PYTHON) + " '" + MOLACCEL_MP4_CHECKER + "' '" +
                              (dir / "turn.mp4").string() + "' 3 96 64 > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0);
  {
    VideoWriter abandoned(dir / "abandoned.mp4", 64, 48, 10);
    options.width = 64;
    options.height = 48;
    abandoned.add_frame(render_scene(scene, options));
    Image wrong;
    wrong.width = 32;
    wrong.height = 32;
    wrong.rgba.resize(32 * 32 * 4);
    EXPECT_THROW(abandoned.add_frame(wrong), Error);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "abandoned.mp4"));
}

// Frames queue for the writer's encoding thread (two wait at most): twelve frames given by copy and
// twelve moved (partly in the memory of frames the writer has encoded) make the same file, which
// the box reader counts.
TEST(DisplayVideo, QueuedFramesMakeTheSameFileCopiedOrMoved) {
  if (!video_available()) GTEST_SKIP() << "this build has no FFmpeg libraries";
  molaccel::testing::TempDir dir;
  std::vector<Image> frames = turning_lobes(12, 64, 48, 15.0);
  {
    VideoWriter copied(dir / "copied.mp4", 64, 48, 12);
    for (const Image& frame : frames) copied.add_frame(frame);
    copied.finish();
    // Moved in, and every frame after the first two drawn into the memory of an encoded one (the
    // writer hands spent frames back; at most a few are kept).
    VideoWriter moved(dir / "moved.mp4", 64, 48, 12);
    std::size_t recycled = 0;
    for (std::size_t f = 0; f < frames.size(); ++f) {
      Image spent = moved.spent_frame();
      if (!spent.rgba.empty()) {
        ++recycled;
        EXPECT_EQ(spent.width, 64);
        spent.rgba = frames[f].rgba;  // the same size: into its memory
        frames[f] = std::move(spent);
      }
      moved.add_frame(std::move(frames[f]));
    }
    moved.finish();
    EXPECT_LE(recycled, frames.size() - 1);   // how many depends on the encoder's pace
    const Image spent = moved.spent_frame();  // after finish() every frame is encoded
    EXPECT_EQ(spent.rgba.size(), 64u * 48 * 4);
    EXPECT_EQ(moved.frames(), 12u);
    EXPECT_THROW(moved.add_frame(Image{}), Error);  // after finish()
  }
  EXPECT_FALSE(molaccel::testing::read_file(dir / "copied.mp4").empty());
  EXPECT_EQ(molaccel::testing::read_file(dir / "copied.mp4"),
            molaccel::testing::read_file(dir / "moved.mp4"));
  if (std::string(MOLACCEL_PYTHON).empty()) return;
  const std::string command = std::string(MOLACCEL_PYTHON) + " '" + MOLACCEL_MP4_CHECKER + "' '" +
                              (dir / "moved.mp4").string() + "' 12 64 48 > /dev/null";
  EXPECT_EQ(std::system(command.c_str()), 0);
}

}  // namespace
}  // namespace molaccel::display
