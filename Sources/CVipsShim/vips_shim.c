#include "vips_shim.h"

#include <pthread.h>
#include <string.h>
#include <vips/vips.h>

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static int start_status = -1;

static void ignore(const char *domain, GLogLevelFlags level, const char *message, gpointer data) {}

static void start(void) {
    if (VIPS_INIT("lender")) return;
    // A hostile upload makes libvips print warnings ("not enough data") to stderr; the
    // reason for every failure reaches the caller through vips_shim_take_error instead.
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, ignore, NULL);
    // Operations are not reused across requests, and each call runs on the caller's thread.
    vips_cache_set_max(0);
    vips_concurrency_set(1);
    // Refuse every loader but the three we accept, so no other parser ever sees uploaded bytes.
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
    vips_operation_block_set("VipsForeignLoadPng", FALSE);
    vips_operation_block_set("VipsForeignLoadWebp", FALSE);
    start_status = 0;
}

int vips_shim_init(void) {
    pthread_once(&start_once, start);
    return start_status;
}

void vips_shim_take_error(char *out, size_t cap) {
    if (cap == 0) return;
    const char *text = vips_error_buffer();
    size_t length = strlen(text);
    if (length >= cap) length = cap - 1;
    memcpy(out, text, length);
    out[length] = '\0';
    vips_error_clear();
}

void vips_shim_free(void *buffer) { g_free(buffer); }

void vips_shim_unref(vips_shim_image *image) {
    if (image) g_object_unref(image);
}

const char *vips_shim_loader(const void *buffer, size_t length) {
    return vips_foreign_find_load_buffer(buffer, length);
}

int vips_shim_header(const void *buffer, size_t length, int *width, int *height, int *pixel_bytes) {
    // Opening an image reads its header only; pixels are decoded when first asked for.
    VipsImage *image = vips_image_new_from_buffer(buffer, length, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (!image) return -1;
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *pixel_bytes = vips_image_get_bands(image) * (int)vips_format_sizeof(vips_image_get_format(image));
    g_object_unref(image);
    return 0;
}

char **vips_shim_fields(const void *buffer, size_t length) {
    VipsImage *image = vips_image_new_from_buffer(buffer, length, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (!image) return NULL;
    char **fields = vips_image_get_fields(image);
    g_object_unref(image);
    return fields;
}

void vips_shim_free_fields(char **fields) { g_strfreev(fields); }

vips_shim_image *vips_shim_decode(const void *buffer, size_t length) {
    VipsImage *lazy = vips_image_new_from_buffer(
        buffer, length, "", "access", VIPS_ACCESS_SEQUENTIAL, "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    if (!lazy) return NULL;
    // Decode every pixel now, so a truncated or corrupt file fails here, and the result
    // no longer reads from the caller's buffer.
    VipsImage *image = vips_image_copy_memory(lazy);
    g_object_unref(lazy);
    if (!image) return NULL;

    if (vips_image_get_typeof(image, VIPS_META_ICC_NAME)) {
        // Stripping drops the profile, so bring the pixels to sRGB first. A broken profile
        // is not worth refusing the photo for: keep the pixels as they are.
        VipsImage *srgb;
        if (vips_icc_transform(image, &srgb, "srgb", "embedded", TRUE, "intent", VIPS_INTENT_PERCEPTUAL, NULL)) {
            vips_error_clear();
        } else {
            g_object_unref(image);
            image = srgb;
        }
    }

    VipsImage *upright;
    int failed = vips_autorot(image, &upright, NULL);
    g_object_unref(image);
    return failed ? NULL : upright;
}

void vips_shim_size(vips_shim_image *image, int *width, int *height) {
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
}

int vips_shim_thumbnail(vips_shim_image *image, int size, vips_shim_image **out) {
    return vips_thumbnail_image(
        image, out, size, "height", size, "size", VIPS_SIZE_DOWN, "no_rotate", TRUE, NULL);
}

int vips_shim_jpeg(vips_shim_image *image, int quality, void **out, size_t *length) {
    return vips_jpegsave_buffer(
        image, out, length, "Q", quality, "strip", TRUE, "optimize_coding", TRUE, NULL);
}

int vips_shim_test_image(int width, int height, const char *suffix, void **out, size_t *length) {
    VipsImage *xy = NULL, *wrapped = NULL, *bytes = NULL, *rgb = NULL, *tagged = NULL;
    int failed = vips_xyz(&xy, width, height, NULL)
        || vips_remainder_const1(xy, &wrapped, 256, NULL)
        || vips_cast(wrapped, &bytes, VIPS_FORMAT_UCHAR, NULL)
        || vips_bandjoin_const1(bytes, &rgb, 128, NULL)
        || vips_copy(rgb, &tagged, "interpretation", VIPS_INTERPRETATION_sRGB, NULL)
        || vips_image_write_to_buffer(tagged, suffix, out, length, NULL);
    VIPS_UNREF(tagged);
    VIPS_UNREF(rgb);
    VIPS_UNREF(bytes);
    VIPS_UNREF(wrapped);
    VIPS_UNREF(xy);
    return failed ? -1 : 0;
}

int vips_shim_striped_noise(int width, int height, const char *suffix, void **out, size_t *length) {
    // One row of noise, repeated: each PNG row after the first is "Up" of zeros (a few KB),
    // while every JPEG block is noise across (issue 48's amplification).
    VipsImage *row = NULL, *bytes = NULL, *rgb = NULL, *tall = NULL, *tagged = NULL;
    int failed = vips_gaussnoise(&row, width, 1, "mean", 128.0, "sigma", 60.0, NULL)
        || vips_cast(row, &bytes, VIPS_FORMAT_UCHAR, NULL)
        || vips_bandjoin_const1(bytes, &rgb, 200, NULL)
        || vips_replicate(rgb, &tall, 1, height, NULL)
        || vips_copy(tall, &tagged, "interpretation", VIPS_INTERPRETATION_sRGB, NULL)
        || vips_image_write_to_buffer(tagged, suffix, out, length, NULL);
    VIPS_UNREF(tagged);
    VIPS_UNREF(tall);
    VIPS_UNREF(rgb);
    VIPS_UNREF(bytes);
    VIPS_UNREF(row);
    return failed ? -1 : 0;
}
