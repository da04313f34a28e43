// JPEG through libjpeg(-turbo). Its errors longjmp out of the library (its default handler
// calls exit()); the jumps land in small functions whose frames hold no C++ objects to skip.
#include <csetjmp>
#include <cstddef>
#include <cstdio>  // before jpeglib.h, which uses size_t and FILE

#include <jerror.h>
#include <jpeglib.h>

#include "ember/core/factories.h"
#include "ember/data/image_decode.h"

namespace ember::data {

namespace {

struct ErrorManager {
  jpeg_error_mgr pub;  // first, as libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// Warnings are dropped, except a file that ends early: libjpeg fills the rest with gray where
// PIL raises "image file is truncated".
void emit_message(j_common_ptr cinfo, int level) {
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) error_exit(cinfo);
}

// Frees libjpeg's state on every way out, from a frame no longjmp crosses.
struct DestroyOnExit {
  jpeg_decompress_struct* cinfo;
  ~DestroyOnExit() { jpeg_destroy_decompress(cinfo); }
};

// The header, up to the output size: nothing the size of the image is allocated yet.
bool read_header(jpeg_decompress_struct* cinfo, ErrorManager* err, const std::vector<uint8_t>& bytes) {
  if (setjmp(err->jump)) return false;
  jpeg_create_decompress(cinfo);
  jpeg_mem_src(cinfo, const_cast<unsigned char*>(bytes.data()), bytes.size());
  jpeg_read_header(cinfo, TRUE);
  cinfo->out_color_space = JCS_RGB;  // grayscale and YCbCr alike
  jpeg_calc_output_dimensions(cinfo);
  return true;
}

bool read_pixels(jpeg_decompress_struct* cinfo, ErrorManager* err, uint8_t* rgb) {
  if (setjmp(err->jump)) return false;
  jpeg_start_decompress(cinfo);
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = rgb + size_t{cinfo->output_scanline} * cinfo->output_width * 3;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return true;
}

}  // namespace

bool has_jpeg() { return true; }

Tensor decode_jpeg(const std::vector<uint8_t>& bytes, const std::string& path) {
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  cinfo.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = error_exit;
  err.pub.emit_message = emit_message;
  DestroyOnExit destroy{&cinfo};
  if (read_header(&cinfo, &err, bytes)) {
    check_image_size(path, cinfo.output_width, cinfo.output_height);
    Tensor rgb = empty({int64_t{cinfo.output_height}, int64_t{cinfo.output_width}, 3}, kUInt8);
    if (read_pixels(&cinfo, &err, rgb.data_ptr<uint8_t>())) return rgb;
  }
  throw Error(detail::str_cat("decode_image: ", path, " is a corrupt JPEG image: ", err.message));
}

}  // namespace ember::data
