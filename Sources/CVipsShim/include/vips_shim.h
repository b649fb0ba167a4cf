#ifndef LENDER_VIPS_SHIM_H
#define LENDER_VIPS_SHIM_H

// Fixed-argument wrappers over libvips' variadic calls, which Swift cannot make.
// The header names no libvips type, so Swift imports it without glib's headers.
// Every function that fails leaves its reason for vips_shim_take_error.

#include <stddef.h>

/// A decoded image; Swift sees it as an OpaquePointer. Release it with vips_shim_unref.
typedef struct _VipsImage vips_shim_image;

/// Starts libvips once per process (small cache, one worker per call, only jpeg/png/webp loaders); 0 on success.
int vips_shim_init(void);

/// Copies libvips' error text into out (at most cap bytes, NUL-terminated) and clears it.
void vips_shim_take_error(char *out, size_t cap);

/// Frees a buffer libvips allocated (an encoded image).
void vips_shim_free(void *buffer);

/// Drops a reference to an image.
void vips_shim_unref(vips_shim_image *image);

/// The type name of the loader libvips picks from the bytes alone (e.g. "VipsForeignLoadJpegBuffer"), or NULL.
const char *vips_shim_loader(const void *buffer, size_t length);

/// Reads only the header (no pixels are decoded): width and height as stored, and the bytes a decoded pixel takes (bands times sample size); 0 on success.
int vips_shim_header(const void *buffer, size_t length, int *width, int *height, int *pixel_bytes);

/// Metadata field names from the header, NULL-terminated; free with vips_shim_free_fields. NULL on failure.
char **vips_shim_fields(const void *buffer, size_t length);

/// Frees what vips_shim_fields returned.
void vips_shim_free_fields(char **fields);

/// Decodes every pixel (sequential, fail_on=error) into memory, turns it to sRGB if it has an ICC profile, and rotates it upright; NULL on failure. The result does not refer to buffer.
vips_shim_image *vips_shim_decode(const void *buffer, size_t length);

/// The width and height of an image.
void vips_shim_size(vips_shim_image *image, int *width, int *height);

/// Shrinks an image so that its long side is at most size pixels, never enlarging it; 0 on success.
int vips_shim_thumbnail(vips_shim_image *image, int size, vips_shim_image **out);

/// Encodes an image as baseline JPEG at quality with all metadata stripped; free *out with vips_shim_free; 0 on success.
int vips_shim_jpeg(vips_shim_image *image, int quality, void **out, size_t *length);

/// Tests only: a width x height sRGB gradient encoded by suffix (".jpg", ".png", ".gif", ".webp") without stripping; 0 on success.
int vips_shim_test_image(int width, int height, const char *suffix, void **out, size_t *length);
/// A test image of one row of noise repeated: small as a PNG, large as a JPEG.
int vips_shim_striped_noise(int width, int height, const char *suffix, void **out, size_t *length);

#endif
