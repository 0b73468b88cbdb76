"""The file formats a biLM comes in: bilm-tf's options.json + weights.hdf5, ELMoForManyLangs
model directories, TensorFlow checkpoints. They read and write the files against the
network's schemas and layouts (``spacy_elmo.bilm``), which imports nothing of them."""
