// molaccel display module: isosurfaces of scalar grids as triangle meshes, and mesh files.
//
// Engine-free: it takes a grid of floats (any engine's field) and gives vertex/index arrays. The
// orbital engine's CLI uses it for `molaccel orbital surface`.
//
// Surface extraction is marching tetrahedra on the Freudenthal split of every grid cell into six
// tetrahedra around the cell's main diagonal (corner 000 to corner 111). Neighbouring cells split
// their shared faces along the same diagonal, so the surface has no cracks and no ambiguous cases
// (the holes of plain marching cubes): where the surface is closed every edge is shared by exactly
// two triangles.
//
// Canonical form, shared by every backend: a vertex lies on a grid edge from point p to p + d,
// where d is one of the seven forward steps (bit 0 = +i, bit 1 = +j, bit 2 = +k); its id is
// p * 7 + (d - 1), p the point index of the grid layout below. Vertices are numbered in increasing
// edge id; triangles come cell by cell (cells in point-index order of their lowest corner), then in
// the order of the cell's tetrahedra. The reference gives the same set of triangles (compare with
// canonical_triangles()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "molaccel/runtime.hpp"

namespace molaccel::display {

// A read-only view of a scalar field on a grid: point (i, j, k) at origin + i*axes[0] + j*axes[1] +
// k*axes[2], value at values[(i * counts[1] + j) * counts[2] + k] (k fastest, as in cube files).
struct ScalarGrid {
  std::array<double, 3> origin{};
  std::array<std::array<double, 3>, 3> axes{};
  std::array<std::size_t, 3> counts{};
  const float* values = nullptr;
  std::size_t point_count() const { return counts[0] * counts[1] * counts[2]; }
};

struct Mesh {
  std::vector<float> positions;         // x y z per vertex (the grid's length unit)
  std::vector<float> normals;           // unit x y z per vertex, pointing out of the enclosed region
  std::vector<std::uint32_t> indices;   // three per triangle, counter-clockwise seen from outside
  std::vector<std::uint64_t> edge_ids;  // per vertex: the grid edge it lies on (empty for shapes)
  std::size_t vertex_count() const { return positions.size() / 3; }
  std::size_t triangle_count() const { return indices.size() / 3; }
  bool empty() const { return indices.empty(); }
};

// Which side of the level set is enclosed: `above` = values > level (the +iso lobe of an orbital,
// a density), `below` = values < level (the -iso lobe, with level = -iso).
enum class Inside { above, below };

enum class SurfaceBackend {
  automatic,  // cuda when the resources have a GPU, else cpu
  reference,  // double precision, one thread, std::map of edges (the oracle; slow)
  cpu,        // fp32, threaded, generated cell tables
  cuda,       // fp32 kernels on the device; the same triangles and bit-identical vertices as cpu
};
std::string_view to_string(SurfaceBackend backend);
SurfaceBackend parse_surface_backend(std::string_view text);  // throws InputError("--backend", ...)

struct SurfaceInfo {
  std::string backend;  // what ran: "reference", "cpu", "cuda"
  double seconds = 0;
};

// The surface value == level. Normals come from the field's gradient (central differences on the
// grid, one-sided at its faces, interpolated along the edge). Throws InputError when the grid is
// smaller than 2 x 2 x 2 or its axes span no volume. An empty mesh means the level is not crossed.
Mesh extract_isosurface(const Resources& resources, const ScalarGrid& grid, float level, Inside inside,
                        SurfaceBackend backend = SurfaceBackend::automatic, SurfaceInfo* info = nullptr);

// Triangles as vertex edge-id triples, each rotated so that its smallest id comes first (winding
// kept), sorted: equal for two meshes exactly when they hold the same oriented triangles.
std::vector<std::array<std::uint64_t, 3>> canonical_triangles(const Mesh& mesh);

// Area and enclosed volume (divergence theorem; exact for a closed, outward-wound mesh).
double mesh_area(const Mesh& mesh);
double mesh_volume(const Mesh& mesh);

// ---------------------------------------------------------------------------------------------
// Scenes and files.
// ---------------------------------------------------------------------------------------------
struct Colour {
  float r = 1, g = 1, b = 1, a = 1;  // 0..1, linear
};

// One named, single-coloured mesh of a scene (a lobe, the atoms of one element, the bonds).
struct ScenePart {
  std::string name;
  Mesh mesh;
  Colour colour;
};

struct Scene {
  std::vector<ScenePart> parts;
};

// A ball-and-stick model: spheres for atoms (positions and atomic numbers), cylinders for bonds
// between atoms closer than 1.2 times the sum of their covalent radii. Lengths in the unit of
// `positions`; `length_unit_in_angstrom` converts radii (1 for angstrom, 0.529... for bohr).
std::vector<ScenePart> ball_and_stick(const std::vector<std::array<double, 3>>& positions,
                                      const std::vector<int>& atomic_numbers, double length_unit_in_angstrom);

// Phase colours of orbital lobes (VMD's and Avogadro's defaults: blue positive, red negative) and
// CPK colours of elements.
Colour positive_phase_colour();
Colour negative_phase_colour();
Colour element_colour(int atomic_number);

// Scales every position of a scene (e.g. bohr to angstrom before writing).
void scale_scene(Scene& scene, double factor);

enum class MeshFormat { glb, ply, obj };
// From the extension: .glb, .ply, .obj; throws InputError naming `path` for any other.
MeshFormat mesh_format_for(const std::filesystem::path& path);

// Writers, atomic (temporary file + rename; nothing is left behind on failure):
//  * glTF 2.0 binary: one mesh per part (POSITION, NORMAL, indices; a material per part).
//  * PLY binary little-endian: one vertex list (x y z nx ny nz red green blue alpha) and one face
//    list for the whole scene.
//  * OBJ with an MTL beside it (same stem, .mtl): one object and material per part.
// Throws InputError naming `path` when the scene has no triangle.
void write_scene(const std::filesystem::path& path, const Scene& scene);
void write_glb(const std::filesystem::path& path, const Scene& scene);
void write_ply(const std::filesystem::path& path, const Scene& scene);
void write_obj(const std::filesystem::path& path, const Scene& scene);

// ---------------------------------------------------------------------------------------------
// Images: a software rasteriser (z-buffer, Blinn-Phong lighting, supersampled edges) on the CPU
// and in CUDA, with the same camera, coverage rule and lighting.
// ---------------------------------------------------------------------------------------------
struct Image {
  int width = 0, height = 0;
  std::vector<std::uint8_t> rgba;  // row-major from the top row, 4 bytes per pixel
};

// The camera: an orthographic view down -z after rotating the scene about its centre by
// `rotate_x`, then `rotate_y`, then `rotate_z` degrees; the automatic framing fits the scene's
// bounding sphere into the image with a margin, and `zoom` > 1 magnifies it.
struct View {
  double rotate_x = 0, rotate_y = 0, rotate_z = 0;
  double zoom = 1;
};
// "rx=30,ry=-45,rz=0,zoom=1.5" (any subset, in any order); throws InputError("--view", ...).
View parse_view(std::string_view text);

// The sphere the camera fits into the image (radius 0: none, fit the scene being drawn).
struct Framing {
  std::array<double, 3> centre{};
  double radius = 0;
};
// The scene's bounding sphere (centre of its box, farthest vertex); radius 0 for an empty scene.
Framing framing_of(const Scene& scene);
// The smallest sphere holding both (an animation keeps one framing for all its frames).
Framing enclose(const Framing& a, const Framing& b);

enum class RenderBackend {
  automatic,  // render_scene(resources, ...): cuda when the resources have a GPU; render_scene(scene, ...):
              // cpu
  cpu,        // bands of rows on threads
  cuda,       // on the GPU (the one holding the meshes where they come from the device)
};
std::string_view to_string(RenderBackend backend);
RenderBackend parse_render_backend(std::string_view text);  // throws InputError("--render-backend", ...)

struct RenderOptions {
  int width = 1280, height = 960;
  RenderBackend backend = RenderBackend::automatic;
  View view;
  Framing framing;  // radius 0 = framing_of(the scene)
  Colour background{1, 1, 1, 1};
  int supersampling = 2;  // samples per pixel along each axis (edge smoothing)
  int threads = 0;        // bands of rows drawn in parallel (0 = all cores); the image is the same
};

// Draws every part of the scene. Throws InputError("--size", ...) for a size outside 1..16384 and
// InputError("render", ...) for a scene without triangles. Without resources `automatic` is the CPU
// and `cuda` draws on GPU 0 with buffers of its own.
//
// The two renderers cover the same samples (the same double-precision edge functions) and shade
// them with the same arithmetic; they differ only where two fragments meet a sample at equal depth
// (the CPU keeps the first drawn, the GPU the first in scene order at equal float depth), i.e. at
// shared triangle edges and where surfaces touch: a few pixels differ there, by a shade.
Image render_scene(const Scene& scene, const RenderOptions& options);

struct RenderInfo {
  std::string backend;  // what ran: "cpu", "cuda"
  double seconds = 0;
};
// On the resources' devices: automatic = cuda when they have a GPU (one tile on the scheduler, the
// worker's device buffers kept from call to call), else the CPU rasteriser on their threads.
Image render_scene(const Resources& resources, const Scene& scene, const RenderOptions& options,
                   RenderInfo* info = nullptr);

// "1920x1080"; throws InputError("--size", ...).
std::array<int, 2> parse_image_size(std::string_view text);

// PNG through libpng (8-bit RGBA, no interlacing), written atomically. Throws NotCompiled when the
// build has no libpng.
void write_png(const std::filesystem::path& path, const Image& image);
// The two halves of write_png: the PNG file's bytes (thread-safe: several images may be encoded at
// once; about 0.1 s for 1920 x 1080 on one core, much longer than a GPU takes to draw it), and
// those bytes written atomically (inside an OutputGroup on the group's thread).
std::vector<std::uint8_t> encode_png(const Image& image);
void write_png_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& png);

// H.264 video in an MP4 file through FFmpeg's libraries (libavcodec, libavformat, libswscale;
// optional at configure time). Frames are encoded in order on the writer's own thread while the
// caller makes the next ones: add_frame() returns once the frame is queued (it waits while two are
// queued), and an encoder error comes back from the next add_frame() or finish(). The file
// appears, atomically, at finish(). Odd image sizes lose their last column or row (4:2:0 needs
// even sizes).
bool video_available();  // false when the build has no FFmpeg libraries
class VideoWriter {
 public:
  // Throws NotCompiled without FFmpeg, InputError naming `path` when no H.264 encoder is found.
  VideoWriter(const std::filesystem::path& path, int width, int height, int frames_per_second);
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;
  void add_frame(const Image& image);  // the image must have the writer's size (copied)
  void add_frame(Image&& image);       // the same, without the copy
  // A frame given with add_frame(Image&&) that is encoded already (its pixels stale), else an empty
  // image: drawing the next frames into these reuses their memory (up to eight are kept).
  Image spent_frame();
  void finish();  // flushes the encoder and writes the file
  std::size_t frames() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace molaccel::display

// =============================================================================================
// Offline HTML viewer (`molaccel orbital view`): one self-contained page, meshes embedded.
// =============================================================================================
namespace molaccel::display {

struct ViewerOptions {
  std::string title;                      // the page's title
  std::vector<std::string> frame_labels;  // one per frame, shown with it (or empty)
  View view;                              // the starting rotation and zoom (as render_scene's)
  Framing framing;                        // radius 0 = the sphere enclosing every frame's framing_of
  Colour background{1, 1, 1, 1};
  int frames_per_second = 10;  // the play button's speed, 1..240
};

// Writes one HTML page that draws the frames with WebGL and loads nothing else: rotate by
// dragging, zoom with the wheel, R resets, and for several frames a slider and a play button.
// Camera and lighting are render_scene's (orthographic, the framing sphere over 90% of the
// shorter side at zoom 1, two-sided Blinn-Phong). Written atomically. Throws InputError naming
// `path` when there is no frame, a frame has no triangle, or frame_labels has the wrong length.
//
// The scene is the JSON text of the page's <script type="application/json" id="molaccel-scene">
// element (every '<' in it written as \u003c):
//   {"format": "molaccel-viewer", "version": 1, "title": "...", "background": [r, g, b],
//    "view": {"rx", "ry", "rz", "zoom"}, "framing": {"centre": [x, y, z], "radius": r}, "fps": n,
//    "frames": [{"label": "...", "parts": [{"name", "colour": [r, g, b, a], "vertex_count",
//      "triangle_count", "origin": [x, y, z], "extent": [x, y, z], "positions", "normals",
//      "index_bytes": 2 | 4, "indices"}, ...]}, ...]}
// positions, normals and indices are base64 (RFC 4648, padded) of little-endian arrays: positions
// 3 uint16 q per vertex, the position being origin + extent * q / 65535 (origin and extent: the
// part's bounding box; error at most half a step); normals 3 int8 per vertex, round(127 * n);
// indices uint16 (parts of up to 65536 vertices) or uint32, three per triangle, as in the mesh.
void write_html_viewer(const std::filesystem::path& path, const std::vector<Scene>& frames,
                       const ViewerOptions& options = {});

}  // namespace molaccel::display
