# GPAW build settings: MPI, FFTW and OpenBLAS from Debian's packages (libxc-dev libopenblas-dev libfftw3-dev libopenmpi-dev)
mpi = True
compiler = 'mpicc'
fftw = True
scalapack = False
libraries = ['xc', 'fftw3', 'openblas']
