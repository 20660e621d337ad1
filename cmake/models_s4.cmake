# S4D (spec/models-ssm.md section 7): the kernel from diagonal complex parameters, the
# FFT convolution (FFTW: fftw3f for the float library, fftw3 for the double one), the
# diagonal recurrence, the time-tied dropout and the GLU (the layer, src/nn/layers/s4.c, is
# globbed). Included by the top-level CMakeLists.txt before the libraries are defined.
pkg_check_modules(FFTW3F REQUIRED IMPORTED_TARGET fftw3f)
pkg_check_modules(FFTW3 REQUIRED IMPORTED_TARGET fftw3)
list(APPEND SB_NN_SOURCES
    src/nn/ops/s4_kernel.c
)
list(APPEND SB_NN_LIBS PkgConfig::FFTW3F PkgConfig::FFTW3)
