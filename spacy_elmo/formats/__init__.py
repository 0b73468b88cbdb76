"""The file formats a biLM comes in: bilm-tf's options.json + weights.hdf5, ELMoForManyLangs
model directories, TensorFlow checkpoints. They hand the network its options and named arrays."""
