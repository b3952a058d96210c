// MP4 (H.264) through FFmpeg's libraries. The muxer writes into memory through a custom I/O
// context (MP4 needs to seek back to finish its boxes), and finish() hands the bytes to the
// atomic writer, so a failed or abandoned video leaves no file. Frames are converted and encoded
// on the writer's own thread, in order, while the caller makes the next ones.
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "molaccel/display.hpp"

#if MOLACCEL_HAVE_VIDEO
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}
#endif

namespace molaccel::display {

#if MOLACCEL_HAVE_VIDEO
namespace {

std::string av_message(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof(text));
  return text;
}

// FFmpeg 7 made the write callback's data const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WrittenData = const std::uint8_t*;
#else
using WrittenData = std::uint8_t*;
#endif

// The MP4 in memory: a growing buffer with a write position.
struct MemoryFile {
  std::string bytes;
  std::size_t position = 0;
  static int write(void* opaque, WrittenData data, int size) {
    auto* f = static_cast<MemoryFile*>(opaque);
    if (f->position + static_cast<std::size_t>(size) > f->bytes.size()) f->bytes.resize(f->position + size);
    std::memcpy(f->bytes.data() + f->position, data, static_cast<std::size_t>(size));
    f->position += static_cast<std::size_t>(size);
    return size;
  }
  static std::int64_t seek(void* opaque, std::int64_t offset, int whence) {
    auto* f = static_cast<MemoryFile*>(opaque);
    if (whence == AVSEEK_SIZE) return static_cast<std::int64_t>(f->bytes.size());
    const std::int64_t base = (whence & 3) == SEEK_CUR   ? static_cast<std::int64_t>(f->position)
                              : (whence & 3) == SEEK_END ? static_cast<std::int64_t>(f->bytes.size())
                                                         : 0;
    if (base + offset < 0) return -1;
    f->position = static_cast<std::size_t>(base + offset);
    return static_cast<std::int64_t>(f->position);
  }
};

}  // namespace

struct VideoWriter::State {
  std::filesystem::path path;
  int width = 0, height = 0;  // the image size; encoded size rounded down to even
  MemoryFile file;
  AVFormatContext* format = nullptr;
  AVIOContext* io = nullptr;
  AVCodecContext* codec = nullptr;
  AVStream* stream = nullptr;
  AVFrame* frame = nullptr;
  AVPacket* packet = nullptr;
  SwsContext* scale = nullptr;
  std::size_t frames = 0;   // accepted by add_frame
  std::size_t encoded = 0;  // sent to the encoder (the worker's; its pts)
  bool finished = false;
  // The worker and the frames waiting for it (at most kWaiting: the caller waits for room).
  static constexpr std::size_t kWaiting = 2;
  std::thread worker;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Image> waiting;
  // Encoded frames for spent_frame(): up to kSpent (a batch of frames from 2 per GPU on 4 GPUs).
  static constexpr std::size_t kSpent = 8;
  std::vector<Image> spent;
  bool closing = false;  // no more frames: the worker ends when `waiting` is empty
  bool abandon = false;  // the writer is destroyed unfinished: drop what waits
  std::exception_ptr error;

  void fail(const std::string& what, int code) {
    throw InputError(path.string(), 0, fmt::format("video: {}: {}", what, av_message(code)));
  }
  // Sends a frame (nullptr flushes) and moves every finished packet into the container.
  void encode(AVFrame* f) {
    int rc = avcodec_send_frame(codec, f);
    if (rc < 0) fail("encoding a frame", rc);
    while ((rc = avcodec_receive_packet(codec, packet)) >= 0) {
      av_packet_rescale_ts(packet, codec->time_base, stream->time_base);
      packet->stream_index = stream->index;
      rc = av_interleaved_write_frame(format, packet);
      if (rc < 0) fail("writing a packet", rc);
    }
    if (rc != AVERROR(EAGAIN) && rc != AVERROR_EOF) fail("receiving a packet", rc);
  }
  // The worker's loop: each waiting frame converted to YUV and encoded, in order. An error stops it
  // and is rethrown by the next add_frame() or finish().
  void work() {
    for (;;) {
      Image image;
      {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return abandon || closing || !waiting.empty(); });
        if (abandon || waiting.empty()) return;
        image = std::move(waiting.front());
        waiting.pop_front();
      }
      changed.notify_all();  // room for the caller's next frame
      try {
        convert_and_encode(image);
      } catch (...) {
        std::lock_guard lock(mutex);
        error = std::current_exception();
        waiting.clear();
        changed.notify_all();
        return;
      }
      std::lock_guard lock(mutex);
      if (spent.size() < kSpent) spent.push_back(std::move(image));
    }
  }
  void convert_and_encode(const Image& image) {
    int rc = av_frame_make_writable(frame);
    if (rc < 0) fail("frame buffer", rc);
    const std::uint8_t* source[1] = {image.rgba.data()};
    const int stride[1] = {4 * image.width};
    sws_scale(scale, source, stride, 0, frame->height, frame->data, frame->linesize);
    frame->pts = static_cast<std::int64_t>(encoded++);
    encode(frame);
  }
  // Ends the worker: after the waiting frames (closing) or at once (abandon).
  void stop(bool drop) {
    {
      std::lock_guard lock(mutex);
      closing = true;
      abandon = abandon || drop;
    }
    changed.notify_all();
    if (worker.joinable()) worker.join();
  }
  ~State() {
    stop(true);
    sws_freeContext(scale);
    av_packet_free(&packet);
    av_frame_free(&frame);
    avcodec_free_context(&codec);
    if (format) avformat_free_context(format);
    if (io) {
      av_freep(&io->buffer);
      avio_context_free(&io);
    }
  }
};

bool video_available() {
  return true;
}

VideoWriter::VideoWriter(const std::filesystem::path& path, int width, int height, int fps)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.path = path;
  s.width = width;
  s.height = height;
  const int w = width & ~1, h = height & ~1;
  if (w < 2 || h < 2 || fps < 1 || fps > 240)
    throw InputError(path.string(), 0,
                     fmt::format("video: {} x {} at {} frames/s is not encodable", width, height, fps));
  av_log_set_level(AV_LOG_ERROR);  // the encoder's statistics are not for the user's terminal
  const AVCodec* encoder = avcodec_find_encoder(AV_CODEC_ID_H264);
  if (!encoder) throw InputError(path.string(), 0, "video: this FFmpeg has no H.264 encoder");
  int rc = avformat_alloc_output_context2(&s.format, nullptr, "mp4", nullptr);
  if (rc < 0 || !s.format) s.fail("creating the MP4 container", rc);
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBuffer));
  s.io = avio_alloc_context(buffer, kIoBuffer, 1, &s.file, nullptr, &MemoryFile::write, &MemoryFile::seek);
  if (!s.io) throw Error("video: out of memory");
  s.format->pb = s.io;
  s.format->flags |= AVFMT_FLAG_CUSTOM_IO;
  s.stream = avformat_new_stream(s.format, nullptr);
  s.codec = avcodec_alloc_context3(encoder);
  s.frame = av_frame_alloc();
  s.packet = av_packet_alloc();
  if (!s.stream || !s.codec || !s.frame || !s.packet) throw Error("video: out of memory");
  s.codec->width = w;
  s.codec->height = h;
  s.codec->pix_fmt = AV_PIX_FMT_YUV420P;
  s.codec->time_base = AVRational{1, fps};
  s.codec->framerate = AVRational{fps, 1};
  s.codec->gop_size = 2 * fps;
  if (s.format->oformat->flags & AVFMT_GLOBALHEADER) s.codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(s.codec->priv_data, "crf", "20", 0);  // visually lossless for smooth shaded surfaces
  av_opt_set(s.codec->priv_data, "preset", "fast", 0);
  rc = avcodec_open2(s.codec, encoder, nullptr);
  if (rc < 0) s.fail("opening the H.264 encoder", rc);
  rc = avcodec_parameters_from_context(s.stream->codecpar, s.codec);
  if (rc < 0) s.fail("stream parameters", rc);
  s.stream->time_base = s.codec->time_base;
  s.frame->format = AV_PIX_FMT_YUV420P;
  s.frame->width = w;
  s.frame->height = h;
  rc = av_frame_get_buffer(s.frame, 0);
  if (rc < 0) s.fail("frame buffer", rc);
  s.scale =
      sws_getContext(w, h, AV_PIX_FMT_RGBA, w, h, AV_PIX_FMT_YUV420P, SWS_BICUBIC, nullptr, nullptr, nullptr);
  if (!s.scale) throw Error("video: no RGBA to YUV conversion");
  rc = avformat_write_header(s.format, nullptr);
  if (rc < 0) s.fail("writing the MP4 header", rc);
  s.worker = std::thread([&s] { s.work(); });
}

VideoWriter::~VideoWriter() = default;

void VideoWriter::add_frame(const Image& image) {
  add_frame(Image(image));
}

void VideoWriter::add_frame(Image&& image) {
  State& s = *state_;
  if (s.finished) throw Error("video: frame after finish()");
  if (image.width != s.width || image.height != s.height ||
      image.rgba.size() != static_cast<std::size_t>(image.width) * image.height * 4)
    throw Error(fmt::format("video: a {} x {} frame in a {} x {} video", image.width, image.height, s.width,
                            s.height));
  std::unique_lock lock(s.mutex);
  s.changed.wait(lock, [&] { return s.error || s.waiting.size() < State::kWaiting; });
  if (s.error) std::rethrow_exception(s.error);
  s.waiting.push_back(std::move(image));
  ++s.frames;
  lock.unlock();
  s.changed.notify_all();
}

Image VideoWriter::spent_frame() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.spent.empty()) return {};
  Image image = std::move(s.spent.back());
  s.spent.pop_back();
  return image;
}

void VideoWriter::finish() {
  State& s = *state_;
  if (s.finished) return;
  s.stop(false);
  if (s.error) std::rethrow_exception(s.error);
  s.encode(nullptr);
  const int rc = av_write_trailer(s.format);
  if (rc < 0) s.fail("writing the MP4 trailer", rc);
  avio_flush(s.io);
  s.finished = true;
  write_file_atomically(s.path, [&](std::FILE* f) {
    errno = 0;
    if (std::fwrite(s.file.bytes.data(), 1, s.file.bytes.size(), f) != s.file.bytes.size())
      throw InputError(s.path.string(), 0,
                       fmt::format("write failed: {}", std::strerror(errno ? errno : EIO)));
  });
}

std::size_t VideoWriter::frames() const {
  return state_->frames;
}

#else

struct VideoWriter::State {};
bool video_available() {
  return false;
}
VideoWriter::VideoWriter(const std::filesystem::path&, int, int, int) {
  MOLACCEL_THROW(NotCompiled,
                 "MP4 output (this build has no FFmpeg libraries: libavcodec-dev, libavformat-dev, "
                 "libswscale-dev)");
}
VideoWriter::~VideoWriter() = default;
void VideoWriter::add_frame(const Image&) {}
void VideoWriter::add_frame(Image&&) {}
Image VideoWriter::spent_frame() {
  return {};
}
void VideoWriter::finish() {}
std::size_t VideoWriter::frames() const {
  return 0;
}

#endif

}  // namespace molaccel::display
