/* backend.c — backend selection by name. */
#include "backend.h"

ll_status ll_backend_new(const char *name, const qwen_model *model, const ll_backend_params *params,
                         ll_backend **out) {
    *out = NULL;
    if (!name || !strcmp(name, "auto")) {
#ifdef LILAC_CUDA
        if (cuda_device_count() > 0) return cuda_backend_new(model, params, out);
#endif
        return cpu_backend_new(model, params, out);
    }
    if (!strcmp(name, "cpu")) return cpu_backend_new(model, params, out);
    if (!strcmp(name, "cuda")) {
#ifdef LILAC_CUDA
        return cuda_backend_new(model, params, out);
#else
        return ll_err(LL_ERR_UNSUPPORTED, "backend 'cuda': this build has no CUDA support (make CUDA=1)");
#endif
    }
    return ll_err(LL_ERR_INVALID, "unknown backend '%s' (expected cpu, cuda or auto)", name);
}

void ll_backend_free(ll_backend *be) {
    if (be) be->v->free(be);
}
